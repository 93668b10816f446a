import type { INestApplication, ModuleMetadata, Provider, Type } from '@nestjs/common';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import type Redis from 'ioredis';
import { RedisLockModule, type RedisLockModuleOptions } from 'nestjs-redis-lock';
import { SHARED_REDIS_URL } from '../support/shared-redis';

export interface DecoratorAppOptions extends Pick<ModuleMetadata, 'imports'> {
  /** Key prefix on the shared Redis: one per test file (`uniquePrefix()`). */
  prefix: string;
  controllers?: Type[];
  providers?: Provider[];
  /** RedisLockModule options on top of `redis` and `prefix`. */
  lock?: Omit<RedisLockModuleOptions, 'prefix'>;
  /** Listen on an ephemeral port (needed to fire many requests at once with supertest). */
  listen?: boolean;
  /** Serve with Fastify (`@nestjs/platform-fastify`) instead of Express. */
  fastify?: boolean;
}

/**
 * A fixture Nest app with RedisLockModule on the shared Redis: the app a user would write, built
 * with `@nestjs/testing`. Nest's own logger is off; tests that check logs spy on it.
 */
export async function createDecoratorApp(options: DecoratorAppOptions): Promise<INestApplication> {
  const moduleRef = await Test.createTestingModule({
    imports: [
      RedisLockModule.forRoot({ redis: SHARED_REDIS_URL, ...options.lock, prefix: options.prefix }),
      ...(options.imports ?? []),
    ],
    controllers: options.controllers ?? [],
    providers: options.providers ?? [],
  }).compile();
  const app = options.fastify
    ? moduleRef.createNestApplication<NestFastifyApplication>(new FastifyAdapter(), {
        logger: false,
      })
    : moduleRef.createNestApplication({ logger: false });
  if (options.listen || options.fastify) await app.listen(0, '127.0.0.1');
  else await app.init();
  return app;
}

/** Every key under `prefix` right now (SCAN), sorted. */
export async function keysUnder(redis: Redis, prefix: string): Promise<string[]> {
  const pattern = `${prefix.replace(/[*?[\]\\]/g, '\\$&')}*`;
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 500);
    found.push(...keys);
    cursor = next;
  } while (cursor !== '0');
  return found.sort();
}

/** The Redis key of the lease of lock `key` under `prefix` (as `lockRedisKeys` names it). */
export const leaseKey = (prefix: string, key: string): string => `${prefix}{${key}}`;
