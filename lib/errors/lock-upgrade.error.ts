import { readWriteMessages } from './read-write-messages';
import { RedisLockError } from './redis-lock.error';

/**
 * A call chain holding a read lock asked for the write lock of the same key (nested `withLock` or
 * `@Locked`, or `acquire`/`tryAcquire` called inside the read). The
 * writer would wait for every reader, this chain's own read included — a wait for itself — so the
 * call is refused at once. Take the write lock in the outer call instead.
 */
export class LockUpgradeError extends RedisLockError {
  constructor(
    /** The lock key as the caller named it (without prefix). */
    readonly key: string,
  ) {
    super(readWriteMessages.upgrade(key));
  }
}
