import { messages } from '../errors/messages';
import { RedisUnavailableError } from '../errors/redis-unavailable.error';

/**
 * Bounds one Redis command. ioredis queues commands while it reconnects, so without a bound an
 * unreachable Redis turns every lock call into a hang.
 */
export function withTimeout<T>(promise: Promise<T>, ms: number, operation: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new RedisUnavailableError(messages.redisUnavailable(operation, ms))),
      ms,
    );
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
