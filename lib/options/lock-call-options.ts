import type { OnLostPolicy } from './redis-lock-options';

/** Options of one `acquire` / `tryAcquire` call; unset fields take the module defaults. */
export interface AcquireOptions {
  /** Lease length in ms (renewed every `ttl / 3` while held, unless `renew` is false). */
  ttl?: number;
  /** Wait budget in ms when the lock is busy, on a monotonic clock; 0 = fail at once. */
  wait?: number;
  /**
   * Longest time in ms this lock may be held (counted from when the command that granted it was
   * sent, a suspension of the host included); then it is released and its signal aborts with
   * `LockLostError` (reason `'max-hold'`). `Infinity` sets no bound.
   * @default the module's `maxHold` (Infinity)
   */
  maxHold?: number;
  /** Cancels the wait; the call rejects with `signal.reason`, and a late grant is released. */
  signal?: AbortSignal;
  /**
   * Renew the lease in the background while held (watchdog). Turn off for a fixed lease that
   * simply expires, e.g. a rate-limit style "at most once per ttl".
   * @default true
   */
  renew?: boolean;
}

/** Options of `withLock`. */
export interface WithLockOptions extends AcquireOptions {
  /** When the lock was lost while `fn` ran: throw `LockLostError` after it settles, or log. */
  onLost?: OnLostPolicy;
  /** Re-use a lock on the same key already held by this async call chain. @default true */
  reentrant?: boolean;
}
