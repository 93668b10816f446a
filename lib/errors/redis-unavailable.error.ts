import { RedisLockError } from './redis-lock.error';

/**
 * Redis did not answer a lock command in time. For an acquire the outcome is unknown on the
 * server side; the library releases that token in the background, and the TTL bounds it anyway.
 */
export class RedisUnavailableError extends RedisLockError {}
