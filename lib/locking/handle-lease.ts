import { Logger } from '@nestjs/common';
import type { LockHandle } from '../engine/lock-handle';
import { LockLostError } from '../errors/errors';
import type { LeaseKind } from '../keys/lease-kind';
import type { HeldLease } from './held-lease';
import { releaseQuietly } from './holds';

const logger = new Logger('RedisLock');

/** The signal of a handle that has none (an auto-mock's): it never aborts. */
const neverAborted = new AbortController().signal;

/**
 * A handle from a lock source that is not this package's `LockService` (a test double), as holds
 * see a lock: used through the public `LockHandle` interface only — its signal tells a loss, and
 * `release()` ends it. A loss of the lock is the double's to report; a hold's own `maxHold` is
 * logged here, the double having no events to emit it on. Members the handle lacks (an
 * auto-mock's `acquire` resolves `undefined`) read as a lock that stays held until released.
 */
export class HandleLease implements HeldLease {
  readonly redisKeys: { readonly lock: string; readonly kind?: LeaseKind };

  private readonly handle: Partial<LockHandle>;

  constructor(
    handle: LockHandle | undefined,
    /** The key it was acquired for. */
    readonly key: string,
    /** The adapter of the source it came from: re-entrancy joins holds of that source only. */
    readonly owner: object,
    /** The source's own namespace in a call chain's frame, apart from every other source's. */
    frameKey: string,
    /** Several keys held as one: each key's name in the frame (a nested call on one joins). */
    readonly lockNames?: readonly string[],
    /** What it was asked for: a reader's share, a permit, or (absent) the key alone. */
    kind?: LeaseKind,
  ) {
    this.handle = handle ?? {};
    this.redisKeys = { lock: frameKey, kind };
  }

  get token(): string {
    return this.handle.token ?? '';
  }
  get fence(): number {
    return this.handle.fence ?? 0;
  }
  get validUntil(): number {
    return this.handle.validUntil ?? Infinity;
  }
  get isHeld(): boolean {
    return this.handle.isHeld ?? !this.signal.aborted;
  }
  get signal(): AbortSignal {
    return this.handle.signal ?? neverAborted;
  }

  /** The signal's reason when it aborted: a `LockLostError` as given, any other as `not-owner`. */
  get lost(): LockLostError | undefined {
    const signal = this.signal;
    if (!signal.aborted) return undefined;
    const reason: unknown = signal.reason;
    return reason instanceof LockLostError ? reason : new LockLostError(this.key, 'not-owner');
  }

  expireIfDue(): boolean {
    return this.signal.aborted;
  }

  reportHoldLost(error: LockLostError): void {
    logger.warn(error.message);
  }

  async extend(ms?: number): Promise<void> {
    await this.handle.extend?.(ms);
  }

  async release(): Promise<boolean> {
    return (await this.handle.release?.()) ?? true;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await releaseQuietly(this);
  }
}
