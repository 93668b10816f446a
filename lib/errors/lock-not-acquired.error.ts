import { messages } from './messages';
import { RedisLockError } from './redis-lock.error';

/** The lock is held by someone else and the `wait` budget ran out (HTTP 409 from a controller). */
export class LockNotAcquiredError extends RedisLockError {
  constructor(
    /** The lock key as the caller named it (without prefix). */
    readonly key: string,
    /** How long this call waited, in ms. */
    readonly waitedMs: number,
    /** The holder's remaining lease in ms, when known: a good `Retry-After`. */
    readonly retryAfterMs?: number,
  ) {
    super(messages.notAcquired(key, waitedMs, retryAfterMs));
  }
}
