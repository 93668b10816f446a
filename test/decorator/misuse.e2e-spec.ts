/**
 * Misuse of `@Locked` is a clear error, as early as possible: bad options and non-methods at class
 * definition, unknown placeholders at bootstrap (`app.init()` rejects), and an instance Nest did
 * not create (or an app without RedisLockModule) at call time.
 */
import { Controller, Get, Injectable, type ModuleMetadata } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import type Redis from 'ioredis';
import request from 'supertest';
import {
  LockService,
  Locked,
  RedisLockConfigError,
  RedisLockError,
  RedisLockModule,
} from 'nestjs-redis-lock';
import { deleteKeys, redisClient, SHARED_REDIS_URL } from '../support/shared-redis';
import { waitFor } from '../support/time';
import { uniquePrefix } from '../support/unique-prefix';
import { keysUnder } from './decorator-app';

const prefix = uniquePrefix('decorator-misuse');

/** Builds and initialises an app from `metadata`; resolves init's outcome, always closing the app. */
async function bootstrap(metadata: ModuleMetadata, withLockModule = true): Promise<unknown> {
  const moduleRef = await Test.createTestingModule({
    ...metadata,
    imports: [
      ...(withLockModule ? [RedisLockModule.forRoot({ redis: SHARED_REDIS_URL, prefix })] : []),
      ...(metadata.imports ?? []),
    ],
  }).compile();
  const app = moduleRef.createNestApplication({ logger: false });
  try {
    await app.init();
    return undefined;
  } catch (error) {
    return error;
  } finally {
    // Let the module's connection come up before closing: ioredis keeps a socket that is closed
    // while still connecting alive for its 2 s disconnectTimeout, and jest would not exit.
    if (withLockModule)
      await app
        .get(LockService)
        .isLocked('ready')
        .catch(() => undefined);
    await app.close();
  }
}

@Injectable()
class TypoService {
  @Locked('order:<userID>')
  async createOrder(userId: string): Promise<string> {
    return userId;
  }
}

/** A decorator above @Locked that wraps the method hides its parameter names. */
const Wrapped: MethodDecorator = (_target, _key, descriptor) => {
  const inner = descriptor.value as unknown as (...args: unknown[]) => unknown;
  (descriptor as PropertyDescriptor).value = function (this: unknown, ...args: unknown[]) {
    return inner.apply(this, args);
  };
  return descriptor;
};

@Injectable()
class OrderService {
  @Locked('order:<userId>')
  async createOrder(userId: string): Promise<string> {
    return userId;
  }
}

@Controller('plain')
class PlainController {
  @Get(':id')
  @Locked('plain:<id>')
  async get(): Promise<string> {
    return 'ok';
  }
}

describe('misuse of @Locked is a clear error', () => {
  let redis: Redis;

  beforeAll(() => {
    redis = redisClient();
  });

  afterAll(async () => {
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  describe('at bootstrap (app.init() rejects)', () => {
    it('an unknown placeholder on a provider method: RedisLockConfigError naming it, the parameters and the nearest', async () => {
      const error = await bootstrap({ providers: [TypoService] });
      expect(error).toBeInstanceOf(RedisLockConfigError);
      expect((error as Error).message).toContain('<userID> names no parameter');
      expect((error as Error).message).toContain('TypoService.createOrder');
      expect((error as Error).message).toContain('parameters: userId');
      expect((error as Error).message).toContain('did you mean <userId>?');
    });

    it('a placeholder on a method whose parameter names a wrapping decorator below hid', async () => {
      // Only `...args` of the wrapper is left to read; the class itself still defines fine.
      @Injectable()
      class WrappedService {
        @Locked('order:<userId>')
        @Wrapped
        async createOrder(userId: string): Promise<string> {
          return userId;
        }
      }
      const error = await bootstrap({ providers: [WrappedService] });
      expect(error).toBeInstanceOf(RedisLockConfigError);
      expect((error as Error).message).toContain('another decorator may wrap it');
      expect((error as Error).message).toContain('Put @Locked() closest to the method');
    });

    it('closes the connections it opened when it refuses an application context (whose close() runs no hook then)', async () => {
      // A standalone application context whose init failed re-throws that failure from close()
      // and runs no shutdown hook: only the module itself can close what it opened.
      const connectionName = `${prefix}refused`;
      const { hostname, port } = new URL(SHARED_REDIS_URL);
      const moduleRef = await Test.createTestingModule({
        imports: [
          RedisLockModule.forRoot({
            redis: { host: hostname, port: Number(port || 6379), connectionName },
            prefix,
          }),
        ],
        providers: [TypoService],
      }).compile();
      await expect(moduleRef.init()).rejects.toBeInstanceOf(RedisLockConfigError);
      await expect(moduleRef.close()).rejects.toBeInstanceOf(RedisLockConfigError);
      const connected = async () =>
        String(await redis.call('CLIENT', 'LIST'))
          .split('\n')
          .filter((line) => line.includes(`name=${connectionName}`));
      // The server notices a dropped socket a moment later; a leaked one stays for good.
      await waitFor(async () => (await connected()).length === 0, 3_000).catch(() => undefined);
      expect(await connected()).toEqual([]);
    });

    it('boots fine when everything is right', async () => {
      await expect(bootstrap({ providers: [OrderService] })).resolves.toBeUndefined();
    });
  });

  describe('at call time', () => {
    it('a @Locked method of an instance created with `new`: RedisLockError saying how to fix it', async () => {
      const orders = new OrderService();
      const call = orders.createOrder('user-1');
      await expect(call).rejects.toBeInstanceOf(RedisLockError);
      await expect(call).rejects.toThrow(/OrderService\.createOrder.*no LockService is bound/);
      await expect(call).rejects.toThrow(/not `new`/);
      expect(await keysUnder(redis, prefix)).toEqual([]);
    });

    it('an app without RedisLockModule: provider calls reject, routes answer 500', async () => {
      const moduleRef = await Test.createTestingModule({
        providers: [OrderService],
        controllers: [PlainController],
      }).compile();
      const app = moduleRef.createNestApplication({ logger: false });
      await app.init();
      try {
        await expect(app.get(OrderService).createOrder('u')).rejects.toThrow(
          /Import RedisLockModule\.forRoot\(\)/,
        );
        const response = await request(app.getHttpServer()).get('/plain/1');
        expect(response.status).toBe(500);
      } finally {
        await app.close();
      }
    });
  });
});
