import { randomUUID } from 'node:crypto';
import { LockService, type RedisLockModuleOptions } from 'nestjs-redis-lock';
import { deleteKeys, redisClient, SHARED_REDIS_URL } from './shared-redis';
import { uniquePrefix } from './unique-prefix';

/**
 * Creates standalone LockServices sharing defaults (the Redis and the test file's prefix) and
 * closes all of them in one call, for `afterAll`. Each service is what one app instance would own.
 */
export function lockServices(defaults: RedisLockModuleOptions) {
  const created: LockService[] = [];
  return {
    create(options: RedisLockModuleOptions = {}): LockService {
      const service = new LockService({ ...defaults, ...options });
      created.push(service);
      return service;
    },
    async closeAll(): Promise<void> {
      await Promise.all(created.splice(0).map((service) => service.close()));
    },
  };
}

/**
 * Options for a fresh service's first acquire of a free key: a budget to connect in. A
 * `commandTimeout` bounds each command from when it is sent, connecting included, and on a loaded
 * machine a fresh connection's first command can outlast a short one (CI did: fault 02's warm-up).
 * The key is free, so the budget changes nothing but that: the call retries until it connected.
 */
export const CONNECT_BUDGET = { wait: 10_000 } as const;

/**
 * Resolves `service` once its connections are up: it took and released a free key of its own, with
 * {@link CONNECT_BUDGET}. For a suite whose first lock call may not wait (a `tryAcquire`, a timed
 * one) or that Redlock bounds by `nodeTimeout` (200 ms by default) on every node.
 */
export async function warmedUp(service: LockService): Promise<LockService> {
  const lock = await service.acquire(`warm-up:${randomUUID()}`, CONNECT_BUDGET);
  await lock.release();
  return service;
}

/** The Redis key holding a lock's owner token: `<prefix>{<key>}` (see the `prefix` option). */
export function redisKeyOf(prefix: string, key: string): string {
  return `${prefix}{${key}}`;
}

/**
 * A suite on the shared Redis: its own key prefix, a plain client for assertions and
 * LockServices on that prefix. Registers the clean-up in `afterAll`: services closed, then every
 * key under the prefix deleted (never a flush).
 */
export function onSharedRedis(name: string) {
  const prefix = uniquePrefix(name);
  const redis = redisClient();
  const services = lockServices({ redis: SHARED_REDIS_URL, prefix });
  afterAll(async () => {
    await services.closeAll();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });
  return { prefix, redis, services, keyOf: (key: string): string => redisKeyOf(prefix, key) };
}
