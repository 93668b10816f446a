import { LockLostError, type LockLostReason } from '../errors/lock-lost.error';
import { RedisLockError } from '../errors/redis-lock.error';
import type { LockRedisKeys } from '../keys/lock-keys';
import { monotonicNow } from './clock';

/** A held lock, as returned by `LockService.acquire()` and passed to `withLock` callbacks. */
export interface LockHandle {
  /** The lock key as you named it (without the prefix). */
  readonly key: string;
  /** This holder's 128-bit random owner token (hex). Only this token can release or extend the lock. */
  readonly token: string;
  /**
   * Fencing token: strictly increasing per key across all holders. Pass it to the store you write
   * to and let the store refuse a write with a lower fence than it has seen, so a holder that
   * paused past its lease cannot overwrite its successor's work. In Redlock mode: increasing in
   * the order the lock was held, unless a node lost its counter (see the README, Deployment).
   */
  readonly fence: number;
  /** Aborts with a `LockLostError` the moment the lock is known (or must be assumed) lost. */
  readonly signal: AbortSignal;
  /**
   * Until when the lock is ours at the latest, on the monotonic clock of `performance.now()`
   * (not `Date.now()`): the last confirmed lease start plus the lease, minus a drift margin.
   */
  readonly validUntil: number;
  /** True until released or lost. */
  readonly isHeld: boolean;
  /**
   * Sets the lease to `ms` from now (default: the lease it was acquired with); with renewal on, the
   * watchdog keeps renewing with the new length. Rejects with `LockLostError` when the lock is no
   * longer ours.
   */
  extend(ms?: number): Promise<void>;
  /**
   * Releases the lock if it is still ours (compare-and-delete) and wakes waiters. Idempotent.
   * Resolves `true` when the lock was ours until this release, `false` when it had been lost
   * (expired, taken over, or its deadline passed) — then `signal` is aborted as well.
   */
  release(): Promise<boolean>;
}

/** The engine operations a held lock needs. */
export interface LockOperations {
  extendLease(lock: HeldLock, ms: number): Promise<boolean>;
  releaseLease(lock: HeldLock): Promise<boolean>;
  /** Stops renewing and forgets the lock (released or lost). */
  untrack(lock: HeldLock): void;
  /** Safety margin (ms) subtracted from a lease on the local clock (clock drift, latency). */
  drift(ttl: number): number;
  /** Reports a loss (event + log); called exactly once per lost lock. */
  reportLost(lock: HeldLock, error: LockLostError): void;
  /** The lease or its deadline changed (`extend`): the watchdog must look at it again. */
  rescheduled(lock: HeldLock): void;
}

export class HeldLock implements LockHandle {
  /**
   * Created on first read of `signal` only: an AbortSignal costs several µs, and most locks are
   * released without anyone looking at theirs. `lostError` is the state; the signal mirrors it.
   */
  private controller?: AbortController;
  private lostError?: LockLostError;
  private released?: Promise<boolean>;
  /** Current lease length in ms; `extend(ms)` changes it. */
  lease: number;
  validUntil: number;
  /** Watchdog bookkeeping: when the next renewal is due, and whether one is in flight. */
  nextRenewAt: number;
  renewing = false;
  /** False for `renew: false`: the watchdog only watches the deadline. */
  renews = true;

  constructor(
    private readonly operations: LockOperations,
    readonly key: string,
    readonly redisKeys: LockRedisKeys,
    readonly token: string,
    readonly fence: number,
    lease: number,
    /** Monotonic time at which the granting command was sent: the lease started no earlier. */
    sentAt: number,
    /** Used by re-entrancy to tell locks of different LockService instances apart. */
    readonly owner: object,
  ) {
    this.lease = lease;
    this.validUntil = sentAt + lease - operations.drift(lease);
    this.nextRenewAt = sentAt + lease / 3;
  }

  /**
   * Reading the signal checks the local deadline first, so a holder that resumes after a long
   * pause (GC, SIGSTOP, a blocked event loop) sees it aborted before its next step, even if the
   * watchdog's timer has not fired yet.
   */
  get signal(): AbortSignal {
    this.checkDeadline();
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.lostError) this.controller.abort(this.lostError);
    }
    return this.controller.signal;
  }

  get isHeld(): boolean {
    this.checkDeadline();
    return !this.released && !this.lostError;
  }

  /** The loss, if the lock was lost (without creating the signal). */
  get lost(): LockLostError | undefined {
    return this.lostError;
  }

  private checkDeadline(): void {
    if (!this.released && !this.lostError && monotonicNow() > this.validUntil) {
      this.lose('deadline');
    }
  }

  /** Records a lease renewal confirmed by Redis for a command sent at `sentAt`. */
  renewed(sentAt: number, lease: number): void {
    this.validUntil = Math.max(this.validUntil, sentAt + lease - this.operations.drift(lease));
    this.nextRenewAt = sentAt + lease / 3;
  }

  /** Marks the lock lost (once): aborts the signal, stops renewal, reports it. */
  lose(reason: LockLostReason): LockLostError {
    if (this.lostError) return this.lostError;
    const error = new LockLostError(this.key, reason);
    this.lostError = error;
    this.operations.untrack(this);
    this.controller?.abort(error);
    this.operations.reportLost(this, error);
    if (reason === 'deadline' && this.renews && !this.released) {
      // A renewal may still be queued (Redis out of reach): this compare-and-delete goes out on
      // the same connection after it, so a healed link cannot leave our key alive for a lease.
      this.released = this.operations.releaseLease(this).then(
        () => false,
        () => false,
      );
    }
    return error;
  }

  async extend(ms: number = this.lease): Promise<void> {
    if (this.lostError) throw this.lostError;
    if (this.released)
      throw new RedisLockError(`Lock "${this.key}" was released; acquire it again.`);
    if (!Number.isFinite(ms) || ms <= 0) {
      throw new RedisLockError(`extend(ms) needs a finite number of ms > 0, got ${ms}.`);
    }
    const sentAt = monotonicNow();
    const stillOurs = await this.operations.extendLease(this, ms);
    if (!stillOurs) throw this.lose('not-owner');
    this.lease = ms;
    // An explicit extension may shorten the lease, so take its deadline as is.
    this.validUntil = sentAt + ms - this.operations.drift(ms);
    this.nextRenewAt = sentAt + ms / 3;
    this.operations.rescheduled(this);
  }

  release(): Promise<boolean> {
    this.released ??= this.releaseOnce();
    return this.released;
  }

  private async releaseOnce(): Promise<boolean> {
    // Stop renewal first: a renewal already sent reaches Redis before this DEL (same connection).
    this.operations.untrack(this);
    const wasHeld = !this.lostError && monotonicNow() <= this.validUntil;
    const deleted = await this.operations.releaseLease(this);
    if (!deleted) {
      this.lose('not-owner');
      return false;
    }
    if (!wasHeld) {
      this.lose('deadline');
      return false;
    }
    return true;
  }
}
