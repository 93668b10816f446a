import { RedisLockError } from './redis-lock.error';

/** A lock key could not be built: empty, too long, a bad template, or a placeholder with no usable value (HTTP 400). */
export class LockKeyError extends RedisLockError {}
