import Redis from 'ioredis';

/** The shared Redis every e2e run needs (checked by global-setup.js). Never flush it. */
export const SHARED_REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

/** A plain ioredis client for assertions (GET, PTTL, …); `quit()` it in `afterAll`. */
export function redisClient(url: string = SHARED_REDIS_URL): Redis {
  return new Redis(url, { maxRetriesPerRequest: 1 });
}

/** Deletes every key under `prefix` (SCAN, never KEYS or FLUSH): a test's own keys only. */
export async function deleteKeys(redis: Redis, prefix: string): Promise<void> {
  const pattern = `${prefix.replace(/[*?[\]\\]/g, '\\$&')}*`;
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 500);
    if (keys.length > 0) await redis.del(...keys);
    cursor = next;
  } while (cursor !== '0');
}
