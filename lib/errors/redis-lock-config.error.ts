import { RedisLockError } from './redis-lock.error';

/** The module or a decorator was configured wrongly; thrown at startup or at class definition. */
export class RedisLockConfigError extends RedisLockError {}
