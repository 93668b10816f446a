import { messages } from '../errors/messages';
import { RedisUnavailableError } from '../errors/errors';

/**
 * Bounds one Redis command. ioredis queues commands while it reconnects, so without a bound an
 * unreachable Redis turns every lock call into a hang. `failure` turns any rejection (the
 * timeout's included) into the error the caller reports, in the same step: no extra `.catch`
 * layer on a path every acquire and release takes.
 */
export function withTimeout<T>(
  promise: Promise<T>,
  ms: number,
  operation: string,
  failure?: (error: unknown) => unknown,
): Promise<T> {
  // One promise and one timer per command (no Promise.race/finally chain): this is on every
  // acquire and release.
  return new Promise<T>((resolve, reject) => {
    const fail = failure ? (error: unknown) => reject(failure(error)) : reject;
    const timer = setTimeout(
      () => fail(new RedisUnavailableError(messages.redisUnavailable(operation, ms))),
      ms,
    );
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        fail(error);
      },
    );
  });
}
