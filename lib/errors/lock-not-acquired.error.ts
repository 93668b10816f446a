import { messages } from './messages';
import { multiKeyMessages } from './multi-key-messages';
import { RedisLockError } from './redis-lock.error';

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
