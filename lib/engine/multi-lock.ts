import { RedisLockError, type LockLostError } from '../errors/errors';
import { messages } from '../errors/messages';
import { HeldLock } from './held-lock';
import type { LockHandle } from './lock-handle';
import type { MultiLockHandle } from './multi-lock-handle';

/**
 * Several held locks (one per key, each an ordinary `HeldLock` the engine renews, batched with
 * every other) as one: losing any loses all — the combined signal aborts with that key's
 * `LockLostError` and the others are released at once, so nobody keeps part of a set it no longer
 * protects. `extend()` and `release()` act on every key.
 */
export class MultiLock implements MultiLockHandle {
  private keyList?: readonly string[];
  private fencesByKey?: Readonly<Record<string, number>>;
  /** Created on first read of `signal`, as a single key's is: most sets are never looked at. */
  private controller?: AbortController;
  private lostError?: LockLostError;
  private released?: Promise<boolean>;

  constructor(
    /** The locks, in lock order (sorted by Redis name). Never empty. */
    readonly parts: readonly [HeldLock, ...HeldLock[]],
  ) {
    // Told by each part itself rather than through its signal: an AbortSignal and a listener per
    // key cost more than the rest of this constructor, and the parts' signals are never read.
    const lose = (error: LockLostError): void => this.lose(error);
    for (const part of parts) {
      part.onLost = lose;
      if (part.lost) this.lose(part.lost);
      else part.expireIfDue(); // lost now (its deadline passed meanwhile): `lose` runs
    }
  }

  /** The keys, in lock order; built on first read, as `fences` is. */
  get keys(): readonly string[] {
    return (this.keyList ??= Object.freeze(this.parts.map((part) => part.key)));
  }

  /** The keys as one name: `"a, b"`. */
  get key(): string {
    return this.keys.join(', ');
  }

  /** Built on first read: a frozen record costs µs that most calls never use. */
  get fences(): Readonly<Record<string, number>> {
    return (this.fencesByKey ??= Object.freeze(
      Object.fromEntries(this.parts.map((part) => [part.key, part.fence])),
    ));
  }
  get token(): string {
    return this.parts[0].token;
  }
  get fence(): number {
    return this.parts[0].fence;
  }
  get owner(): object {
    return this.parts[0].owner;
  }
  /** Where a call chain's frame finds this lock: under the first key's name (and `lockNames`). */
  get redisKeys(): { readonly lock: string } {
    return this.parts[0].redisKeys;
  }
  /** Every key's Redis name: re-entrancy finds the whole set under each of them. */
  get lockNames(): readonly string[] {
    return this.parts.map((part) => part.redisKeys.lock);
  }
  get validUntil(): number {
    return Math.min(...this.parts.map((part) => part.validUntil));
  }
  get signal(): AbortSignal {
    this.expireIfDue();
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.lostError) this.controller.abort(this.lostError);
    }
    return this.controller.signal;
  }
  get isHeld(): boolean {
    this.expireIfDue();
    return !this.released && !this.lostError;
  }
  get lost(): LockLostError | undefined {
    return this.lostError;
  }

  /** Checks every key's deadline: one past it loses the whole set. True when lost. */
  expireIfDue(): boolean {
    for (const part of this.parts) part.expireIfDue();
    return this.lostError !== undefined;
  }

  reportHoldLost(error: LockLostError, handle: LockHandle): void {
    this.parts[0].reportHoldLost(error, handle);
  }

  /** Extends every key's lease to `ms`; one found lost loses (and rejects for) all. */
  async extend(ms?: number): Promise<void> {
    if (this.lostError) throw this.lostError;
    if (this.released) throw new RedisLockError(messages.released(this.key));
    const results = await Promise.allSettled(this.parts.map((part) => part.extend(ms)));
    if (this.lostError) throw this.lostError;
    const failed = results.find((result) => result.status === 'rejected');
    if (failed) throw failed.reason;
  }

  /** Keeps every key until at least `at` (monotonic) when released sooner (`minHold`). */
  keepAtLeastUntil(at: number): void {
    for (const part of this.parts) part.keepAtLeastUntil(at);
  }

  /** Releases every key; true when all were still ours until now. Idempotent. */
  release(): Promise<boolean> {
    this.released ??= HeldLock.releaseAll(this.parts).then(
      (answers) => answers.every(Boolean) && !this.lostError,
    );
    return this.released;
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.release().then(
      () => undefined,
      (error: unknown) => this.parts[0].reportReleaseFailed(error),
    );
  }

  /** One key was lost: the set is (signal aborted once, with its error); free the others. */
  private lose(error: LockLostError): void {
    if (this.lostError) return;
    this.lostError = error;
    this.controller?.abort(error);
    // Not awaited: the signal says it all; each release is bounded and reports its own outcome.
    void HeldLock.releaseAll(this.parts.filter((part) => part.isHeld)).catch(() => false);
  }
}
