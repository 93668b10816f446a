import { RedisLockError } from './redis-lock.error';

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
