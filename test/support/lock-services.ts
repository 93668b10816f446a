import { LockService, type RedisLockModuleOptions } from 'nestjs-redis-lock';

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

/** The Redis key holding a lock's owner token: `<prefix>{<key>}` (see the `prefix` option). */
export function redisKeyOf(prefix: string, key: string): string {
  return `${prefix}{${key}}`;
}
