/**
 * Every error class the library throws, in one file: `RedisLockError` is the base of all of them,
 * so one `instanceof` check catches any. Their texts come from the catalogue in messages.ts.
 */
import { leaderMessages, messages, multiKeyMessages, readWriteMessages } from './messages';

/** Base class of every error this library throws, so `catch (e) { if (e instanceof RedisLockError) … }` works. */
export class RedisLockError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    Error.captureStackTrace?.(this, new.target);
  }
}

/** The module or a decorator was configured wrongly; thrown at startup or at class definition. */
export class RedisLockConfigError extends RedisLockError {}

/** A lock key could not be built: empty, too long, a bad template, or a placeholder with no usable value (HTTP 400). */
export class LockKeyError extends RedisLockError {}

/** The lock is held by someone else and the `wait` budget ran out (HTTP 409 from a controller). */
export class LockNotAcquiredError extends RedisLockError {
  constructor(
    /**
     * The lock key as the caller named it (without prefix); for a multi-key call, the key that was
     * still busy (the call took none of its keys).
     */
    readonly key: string,
    /** How long this call waited, in ms. */
    readonly waitedMs: number,
    /** The holder's remaining lease in ms, when known: a good `Retry-After`. */
    readonly retryAfterMs?: number,
    /** A multi-key call: every key it asked for, in lock order. */
    readonly keys?: readonly string[],
  ) {
    const message = messages.notAcquired(key, waitedMs, retryAfterMs);
    const head = `Lock "${key}"`;
    super(keys ? message.replace(head, `${head} ${multiKeyMessages.together(keys)}`) : message);
  }
}

/** Why a held lock stopped being ours. */
export type LockLostReason =
  /** The key was gone or held by another token when we renewed, extended or released it. */
  | 'not-owner'
  /**
   * The lease ran out on our local (monotonic) clock before Redis' answer to its grant or to a
   * renewal arrived.
   */
  | 'deadline'
  /**
   * The `LockService` shut down while the lock was still held, after waiting `shutdownGrace` ms
   * for the work to release it: the signal aborted before the key was released.
   */
  | 'shutdown'
  /**
   * It was held for its whole `maxHold`: renewal stopped and the lock was released (for a
   * re-entrant call's own `maxHold`: that call's hold ended; the key goes with the last hold).
   */
  | 'max-hold'
  /**
   * The wall clock jumped ahead of the monotonic clock by more than the lease had left: the host
   * was probably suspended (or restored from a snapshot) while Redis kept counting.
   */
  | 'clock-jump'
  /**
   * The primary refused the renewal because too few replicas are in reach
   * (`min-replicas-to-write`): it may be cut off while a replica is promoted and grants the key
   * to someone else, so the lease is not counted on until its deadline.
   */
  | 'no-replicas';

const why: Record<LockLostReason, string> = {
  'not-owner': 'the key expired or another holder owns it',
  deadline: "the lease ran out before Redis' answer to its grant or to a renewal arrived",
  shutdown: 'the LockService shut down and its `shutdownGrace` ran out before the work released it',
  'max-hold':
    'it was held for its whole `maxHold`, so this hold ended (the key is released with the last hold); raise `maxHold` if the work needs longer',
  'clock-jump':
    'the wall clock jumped ahead of the monotonic clock, as after a suspended host, so the lease may have run out on Redis',
  'no-replicas':
    'the Redis primary refused to renew it for lack of replicas in reach (min-replicas-to-write), so it may be cut off while a replica takes over',
};

/** A held lock was lost before its holder released it: the work it protected may have overlapped. */
export class LockLostError extends RedisLockError {
  constructor(
    readonly key: string,
    readonly reason: LockLostReason,
  ) {
    super(messages.lost(key, why[reason]));
  }
}

/**
 * Why a term of leadership ended: the lease was lost as a lock's is (`LockLostReason`: renewal
 * found it gone, Redis out of reach past the lease, a suspended host, the term limit, shutdown),
 * or this replica gave it up (`'resigned'`, by `resign()` or a graceful shutdown).
 */
export type LeaderRevokedReason = LockLostReason | 'resigned';

/**
 * The abort reason of a leader's `signal`: its term ended, and the work it started as leader must
 * stop. `cause` is the lease's `LockLostError` when the lease was lost.
 */
export class LeadershipRevokedError extends RedisLockError {
  constructor(
    readonly role: string,
    readonly term: number,
    readonly reason: LeaderRevokedReason,
    cause?: LockLostError,
  ) {
    const text = reason === 'resigned' ? leaderMessages.resigned() : why[reason];
    super(leaderMessages.revoked(role, term, text), { cause });
  }
}

/**
 * The abort reason of a leader handle's `signal` while this replica has not led the role yet:
 * nothing done as leader may start.
 */
export class NotLeaderError extends RedisLockError {
  constructor(readonly role: string) {
    super(leaderMessages.notLeading(role));
  }
}

/**
 * An acquire refused because its `LockService` is shutting down (`close()`, or Nest's
 * application shutdown): no new lock is granted while the held ones are drained. Also ends
 * acquires that were waiting when the shutdown began.
 */
export class LockServiceClosedError extends RedisLockError {}

/**
 * A multi-key lock call nested in lock calls that hold some, but not all, of its keys: taking the
 * rest there could deadlock, so the call is refused. Take every key in one outer call instead.
 */
export class LockReentryError extends RedisLockError {}

/**
 * A call chain holding a lock asked for the same key as a kind of lock that waits for the one it
 * holds (nested `withLock` or `@Locked`, or `acquire`/`tryAcquire` called inside it): the write
 * lock inside a read, or a semaphore's permit inside a mutex, write or read lock — or any of
 * those inside a permit. Kinds on one name exclude each other, so the call would wait for its
 * own chain; it is refused at once. Take one kind for the whole chain in the outer call instead.
 */
export class LockUpgradeError extends RedisLockError {
  constructor(
    /** The lock key as the caller named it (without prefix). */
    readonly key: string,
    message: string = readWriteMessages.upgrade(key),
  ) {
    super(message);
  }
}

/**
 * Redis did not answer a lock command in time. For an acquire the outcome is unknown on the
 * server side; the library releases that token in the background, and the TTL bounds it anyway.
 */
export class RedisUnavailableError extends RedisLockError {}

/**
 * Redis answered a lock command with an error that retrying will not fix: a foreign value of
 * another type under the lock's key (`WRONGTYPE`), an ACL that forbids the lock's commands
 * (`NOPERM`), Redis out of memory (`OOM`), or a command the server does not know. Unlike
 * {@link RedisUnavailableError} it is thrown at once, never retried within a `wait` budget.
 */
export class RedisCommandError extends RedisLockError {
  constructor(
    message: string,
    /** The first word of Redis' error reply, e.g. `WRONGTYPE`, `NOPERM`, `OOM`, `ERR`. */
    readonly code: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/**
 * Holders of one semaphore key named different `permits`: the call is refused instead of letting
 * holders count against two limits at once. Not retryable as it is: fix the call's `permits`.
 */
export class SemaphoreLimitConflictError extends RedisLockConfigError {
  constructor(
    message: string,
    /** The limit the key's current holders took it with. */
    readonly heldPermits: number,
    /** The limit this call asked for. */
    readonly requestedPermits: number,
  ) {
    super(message);
  }
}
