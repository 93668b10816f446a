import type { HeldLease } from './held-lease';
import type { MultiLockHandle } from '../engine/multi-lock-handle';
import { LockLostError, RedisLockError } from '../errors/errors';
import { messages } from '../errors/messages';

/**
 * The hold a scoped handle belongs to (`Hold` in holds.ts), as far as the handle uses it.
 * Named here so this file does not import holds.ts, which builds the handle.
 */
export interface OwningHold {
  /** Ends the hold if its own `maxHold` passed; true once the hold is over. */
  expireIfDue(): boolean;
  /** Ends the hold; resolves the `LockLostError` if the lock was lost meanwhile. */
  end(): Promise<LockLostError | undefined>;
}

/**
 * The lock as one hold's work sees it (`currentLock()`, `withLock`'s argument): the same lock,
 * with a signal that also aborts when this hold ends (its call settled, its Observable was torn
 * down, its own `maxHold` passed, or `release()` was called on it), so work that checks it stops
 * before the key can be released. `release()` ends this hold only: the lock is released when the
 * last hold on it ends. The signal is only built when someone reads it.
 */
export class ScopedLock implements MultiLockHandle {
  private scope?: AbortController;
  private combined?: AbortSignal;
  private ended = false;
  private endedWith?: unknown;

  constructor(
    private readonly lock: HeldLease,
    private readonly hold: OwningHold,
  ) {}

  get key(): string {
    return this.lock.key;
  }
  get token(): string {
    return this.lock.token;
  }
  get fence(): number {
    return this.lock.fence;
  }
  get validUntil(): number {
    return this.lock.validUntil;
  }
  /** The keys held: several for a multi-key lock, else the one key. */
  get keys(): readonly string[] {
    return this.lock.keys ?? [this.lock.key];
  }
  /** Each key's fence: several for a multi-key lock, else the one key's. */
  get fences(): Readonly<Record<string, number>> {
    return this.lock.fences ?? { [this.lock.key]: this.lock.fence };
  }
  get isHeld(): boolean {
    this.hold.expireIfDue();
    return !this.ended && this.lock.isHeld;
  }
  /** The engine that owns the lock, for re-entrancy checks. */
  get owner(): object {
    return this.lock.owner;
  }

  /** Aborts with the lock's `LockLostError` on loss, or with the reason this hold ended. */
  get signal(): AbortSignal {
    this.hold.expireIfDue();
    if (!this.combined) {
      this.scope = new AbortController();
      if (this.ended) this.scope.abort(this.reason());
      this.combined = AbortSignal.any([this.lock.signal, this.scope.signal]);
    }
    return this.combined;
  }

  async extend(ms?: number): Promise<void> {
    if (this.hold.expireIfDue()) {
      // This hold is over: extending would stretch a lease it no longer protects.
      if (this.endedWith instanceof LockLostError) throw this.endedWith;
      throw this.lock.lost ?? new RedisLockError(messages.released(this.key));
    }
    return this.lock.extend(ms);
  }

  /**
   * Ends this hold (idempotent). The lock is released if no other hold of it is left; otherwise
   * the key stays held for them. Resolves `true` when the lock was ours until this hold ended.
   */
  async release(): Promise<boolean> {
    return (await this.hold.end()) === undefined;
  }

  /** Ends this hold when an `await using` scope ends; never rejects (`end()` never does). */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.release();
  }

  /**
   * The hold ended (before the release): aborts the signal with `reason`, by default an
   * `AbortError` built only if someone reads the signal (most holds end unobserved).
   */
  end(reason?: unknown): void {
    if (this.ended) return;
    this.ended = true;
    this.endedWith = reason;
    if (this.scope) this.scope.abort(this.reason());
  }

  private reason(): unknown {
    this.endedWith ??= new DOMException(messages.holdEnded(this.key), 'AbortError');
    return this.endedWith;
  }
}
