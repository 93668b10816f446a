import { RedisLockConfigError } from './redis-lock-config.error';

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
