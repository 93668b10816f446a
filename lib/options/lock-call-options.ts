import type { ReadWriteMode } from './read-write-options';
import type { OnBusyPolicy, OnLostPolicy } from './redis-lock-options';

// The options of one lock call, one interface per way of calling. Every field is optional and
// falls back on the `RedisLockModule` option of the same name (see redis-lock-options.ts).

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
  /**
   * Shortest time in ms the lock is held, counted from its acquisition: when the work (or
   * `release()`) comes sooner, the key stays held — its lease shortened to what remains of the
   * minimum, owner-checked — and the release counts as done. For jobs that must run once per
   * tick across replicas (see docs/scheduled-jobs.md). At most `maxHold`.
   * @default the module's `minHold` (0: the key is deleted at once)
   */
  minHold?: number;
  /** Cancels the wait; the call rejects with `signal.reason`, and a late grant is released. */
  signal?: AbortSignal;
  /**
   * Renew the lease in the background while held (watchdog). `false`: a fixed lease of `ttl`,
   * never renewed — the lock is lost if the work outlasts it, and is still released when the
   * work ends (to keep it held after the work, "at most once per ttl", set `minHold`).
   * @default true
   */
  renew?: boolean;
  /**
   * Makes the lock a semaphore: up to `permits` holders of the key at once, each with its own
   * permit (token, lease, renewal). Every holder of the key must name the same number (else
   * `SemaphoreLimitConflictError`). A mutex, a read lock and a semaphore on one key exclude each
   * other (each answers the others busy; nested in one another, `LockUpgradeError`). In fair mode (module option `fair`) its waiters are served in arrival order.
   * A semaphore has no readers or writers: `mode` and `writerPriority` beside it are refused
   * (`RedisLockConfigError`). Absent: the plain mutex. See docs/semaphores.md.
   */
  permits?: number;
  /**
   * Read-write locks: `'read'` takes a reader's share of the key — many readers at once, never
   * beside a writer; `'write'` takes the key alone, as a plain lock does (and waits for the
   * readers to leave). docs/read-write.md.
   * @default 'write'
   */
  mode?: ReadWriteMode;
  /**
   * A writer (mode `'write'`) that waits for readers holds back new readers meanwhile. Only for
   * writers. In fair mode, `false` keeps the writer out of the queue: it holds nobody back.
   * @default the module's `writerPriority` (true)
   */
  writerPriority?: boolean;
}

/** Options of `withLock`: those of `acquire`, and what to do about a lost lock and nesting. */
export interface WithLockOptions extends AcquireOptions {
  /** When the lock was lost while `fn` ran: throw `LockLostError` after it settles, or log. */
  onLost?: OnLostPolicy;
  /** Re-use a lock on the same key already held by this async call chain. @default true */
  reentrant?: boolean;
}

/** Options of `@Locked()`; unset fields take the `RedisLockModule` defaults. */
export interface LockedOptions {
  /** Lease length in ms (renewed every `ttl / 3` while held, unless `renew` is false). */
  ttl?: number;
  /** Wait budget in ms when the lock is busy, on a monotonic clock; 0 = give up at once. */
  wait?: number;
  /**
   * Renew the lease in the background while the method runs (watchdog). `false`: a fixed lease of `ttl`,
   * never renewed — the lock is lost if the work outlasts it, and is still released when the
   * work ends (to keep it held after the work, "at most once per ttl", set `minHold`).
   * @default true
   */
  renew?: boolean;
  /**
   * Longest time in ms the lock may be held (counted from when the command that granted it was
   * sent, a suspension of the host included); then it is released and its signal aborts with
   * `LockLostError` (reason `'max-hold'`). `Infinity` sets no bound.
   * @default the module's `maxHold` (Infinity)
   */
  maxHold?: number;
  /**
   * Shortest time in ms the lock is held, counted from its acquisition: when the work (or
   * `release()`) comes sooner, the key stays held — its lease shortened to what remains of the
   * minimum, owner-checked — and the release counts as done. For jobs that must run once per
   * tick across replicas (see docs/scheduled-jobs.md). At most `maxHold`.
   * @default the module's `minHold` (0: the key is deleted at once)
   */
  minHold?: number;
  /**
   * When the lock is still busy after `wait`: `'throw'` a `LockNotAcquiredError` (HTTP 409), or
   * `'skip'` the call and return `undefined` (for jobs that must run on one instance only).
   * @default the module's `onBusy` ('throw')
   */
  onBusy?: OnBusyPolicy;
  /**
   * When the lock was lost while the method ran: `'throw'` a `LockLostError` after it settles,
   * or only `'log'` it.
   * @default the module's `onLost` ('throw')
   */
  onLost?: OnLostPolicy;
  /**
   * A locked call nested in a locked call on the same key (same async call chain) re-uses the
   * held lock instead of waiting for itself.
   * @default the module's `reentrant` (true)
   */
  reentrant?: boolean;
  /**
   * Makes the lock a semaphore: up to `permits` holders of the key at once, each with its own
   * permit (token, lease, renewal). Every holder of the key must name the same number (else
   * `SemaphoreLimitConflictError`). A mutex, a read lock and a semaphore on one key exclude each
   * other (each answers the others busy; nested in one another, `LockUpgradeError`). In fair mode (module option `fair`) its waiters are served in arrival order.
   * A semaphore has no readers or writers: `mode` and `writerPriority` beside it are refused
   * (`RedisLockConfigError`). Absent: the plain mutex. See docs/semaphores.md.
   */
  permits?: number;
  /**
   * Read-write locks: `'read'` takes a reader's share of the key — many readers at once, never
   * beside a writer; `'write'` takes the key alone, as a plain lock does (and waits for the
   * readers to leave). docs/read-write.md.
   * @default 'write'
   */
  mode?: ReadWriteMode;
  /**
   * A writer (mode `'write'`) that waits for readers holds back new readers meanwhile. Only for
   * writers. In fair mode, `false` keeps the writer out of the queue: it holds nobody back.
   * @default the module's `writerPriority` (true)
   */
  writerPriority?: boolean;
}
