import { RedisLockError } from './redis-lock.error';

/**
 * A multi-key lock call nested in lock calls that hold some, but not all, of its keys: taking the
 * rest there could deadlock, so the call is refused. Take every key in one outer call instead.
 */
export class LockReentryError extends RedisLockError {}
