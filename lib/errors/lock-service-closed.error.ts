import { RedisLockError } from './redis-lock.error';

/**
 * An acquire refused because its `LockService` is shutting down (`close()`, or Nest's
 * application shutdown): no new lock is granted while the held ones are drained. Also ends
 * acquires that were waiting when the shutdown began.
 */
export class LockServiceClosedError extends RedisLockError {}
