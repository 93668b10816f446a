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
   * the order the lock was held, unless a node lost its counter (see docs/deployment.md, Redlock).
   */
  readonly fence: number;
  /** Aborts with a `LockLostError` the moment the lock is known (or must be assumed) lost. */
  readonly signal: AbortSignal;
  /**
   * Until when the lock is ours at the latest, on the monotonic clock of `performance.now()`
   * (not `Date.now()`): when the last confirmed lease command was sent, plus its lease, minus a
   * drift margin — less any time the wall clock jumped ahead since (a suspended host). Never
   * beyond what Redis holds: while an extension is in flight it is the sooner of the two leases.
   */
  readonly validUntil: number;
  /** True until released or lost (its deadline or `maxHold` passed, or Redis said it is not ours). */
  readonly isHeld: boolean;
  /**
   * Sets the lease to `ms` from now (default: the lease it was acquired with; at most 2^31 − 1
   * ms); with renewal on, the watchdog keeps renewing with the new length. Waits for a renewal in
   * flight first, so the two reach Redis in order. Rejects with `LockLostError` when the lock is
   * not ours any more, or was declared lost before the answer came; if it fails otherwise (Redis
   * out of reach) the deadline is the sooner of the old lease and the requested one.
   */
  extend(ms?: number): Promise<void>;
  /**
   * Releases the lock if it is still ours (compare-and-delete) and wakes waiters. Idempotent.
   * Resolves `true` when the lock was ours until this release, `false` when it had been lost
   * (expired, taken over, or its deadline passed) — then `signal` is aborted as well.
   */
  release(): Promise<boolean>;
  /**
   * `await using lock = await locks.acquire(key)` releases the lock when the scope ends, as
   * `release()` does — also when the scope ends by a throw. Never rejects, so it never replaces
   * the scope's own error: a release that failed is logged (the lease frees the key), and a loss
   * is on `signal` and the `'lost'` event, as with `withLock(…, { onLost: 'log' })`.
   */
  [Symbol.asyncDispose](): Promise<void>;
}
