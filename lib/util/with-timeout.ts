import { messages } from '../errors/messages';
import { RedisUnavailableError } from '../errors/redis-unavailable.error';

/**
 * Bounds one Redis command. ioredis queues commands while it reconnects, so without a bound an
 * unreachable Redis turns every lock call into a hang.
 */
export function withTimeout<T>(promise: Promise<T>, ms: number, operation: string): Promise<T> {
  // One promise and one timer per command (no Promise.race/finally chain): this is on every
  // acquire and release.
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new RedisUnavailableError(messages.redisUnavailable(operation, ms))),
      ms,
    );
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}
