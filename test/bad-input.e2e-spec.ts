/**
 * Bad input fails early and clearly, with one error class per failure a user can act on: bad
 * keys and per-call options are rejected before any Redis call, an unknown module option fails
 * the Nest bootstrap, and an unreachable Redis fails within the time budget instead of hanging.
 * Option checks that need neither Redis nor an app are unit specs beside the option code.
 */
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import {
  LockKeyError,
  LockService,
  RedisLockConfigError,
  RedisLockModule,
  RedisUnavailableError,
  type RedisLockModuleOptions,
} from 'nestjs-redis-lock';
import Redis from 'ioredis';
import { freePort } from './support/free-port';
import { lockServices } from './support/lock-services';
import { startRedis, stopAllRedis, type RedisServer } from './support/redis-server';
import { now, sleep } from './support/time';

let server: RedisServer;
let probe: Redis;
let services: ReturnType<typeof lockServices>;

beforeAll(async () => {
  server = await startRedis();
  probe = new Redis(server.url);
  services = lockServices({ redis: server.url, prefix: 'bad-input:' });
});

afterAll(async () => {
  await services?.closeAll();
  probe?.disconnect();
  await stopAllRedis();
});

/** Runs `call` and resolves what it threw or rejected with (whichever way it failed). */
async function failureOf(call: () => unknown): Promise<unknown> {
  try {
    await call();
  } catch (error) {
    return error;
  }
  throw new Error('expected the call to fail');
}

/** Lock commands the private server has run so far (connection set-up commands excluded). */
async function lockCommandsRun(): Promise<string[]> {
  const stats = await probe.info('commandstats');
  return [...stats.matchAll(/^cmdstat_(\w+):/gm)]
    .map((match) => match[1]!)
    .filter((command) => !['info', 'client', 'select', 'ping'].includes(command));
}

describe('bad keys', () => {
  it.each([
    ['an empty key', ''],
    ['a missing key', undefined],
    ['a non-string key', 42],
    ['a key over maxKeyLength', 'k'.repeat(513)],
  ])('rejects %s with LockKeyError before any Redis call', async (_, key) => {
    const locks = services.create();
    const fn = jest.fn();
    const bad = key as string;
    expect(await failureOf(() => locks.acquire(bad))).toBeInstanceOf(LockKeyError);
    expect(await failureOf(() => locks.tryAcquire(bad))).toBeInstanceOf(LockKeyError);
    expect(await failureOf(() => locks.withLock(bad, fn))).toBeInstanceOf(LockKeyError);
    expect(await failureOf(() => locks.isLocked(bad))).toBeInstanceOf(LockKeyError);
    expect(await failureOf(() => locks.forceRelease(bad))).toBeInstanceOf(LockKeyError);
    expect(fn).not.toHaveBeenCalled();
    expect(await lockCommandsRun()).toEqual([]);
  });

  it('rejects (rather than throws synchronously) from isLocked() and forceRelease()', async () => {
    const locks = services.create();
    await expect(locks.isLocked('')).rejects.toBeInstanceOf(LockKeyError);
    await expect(locks.forceRelease('')).rejects.toBeInstanceOf(LockKeyError);
  });
});

describe('bad options', () => {
  const badTtls = [0, -1, NaN, Infinity, '100'];
  const badWaits = [-1, NaN, Infinity, '100'];

  it.each(badTtls)(
    'rejects ttl %p per call with RedisLockConfigError before any Redis call',
    async (ttl) => {
      const locks = services.create();
      const options = { ttl: ttl as number };
      expect(await failureOf(() => locks.acquire('k', options))).toBeInstanceOf(
        RedisLockConfigError,
      );
      expect(await failureOf(() => locks.tryAcquire('k', options))).toBeInstanceOf(
        RedisLockConfigError,
      );
      expect(await failureOf(() => locks.withLock('k', jest.fn(), options))).toBeInstanceOf(
        RedisLockConfigError,
      );
      expect(await lockCommandsRun()).toEqual([]);
    },
  );

  it.each(badWaits)(
    'rejects wait %p per call with RedisLockConfigError before any Redis call',
    async (wait) => {
      const locks = services.create();
      const options = { wait: wait as number };
      expect(await failureOf(() => locks.acquire('k', options))).toBeInstanceOf(
        RedisLockConfigError,
      );
      expect(await failureOf(() => locks.withLock('k', jest.fn(), options))).toBeInstanceOf(
        RedisLockConfigError,
      );
      expect(await lockCommandsRun()).toEqual([]);
    },
  );
});

describe('unknown options', () => {
  /** Options as a JavaScript caller (or a config object typed loosely) could pass them. */
  const loose = (options: object): RedisLockModuleOptions => options;

  /** Bootstraps an app importing `lockModule`; resolves what bootstrap failed with, if anything. */
  async function bootstrapFailure(lockModule: ReturnType<typeof RedisLockModule.forRoot>) {
    @Module({ imports: [lockModule] })
    class AppModule {}
    let app: Awaited<ReturnType<typeof NestFactory.createApplicationContext>> | undefined;
    try {
      app = await NestFactory.createApplicationContext(AppModule, {
        logger: false,
        abortOnError: false,
      });
      return undefined;
    } catch (error) {
      return error;
    } finally {
      await app?.close();
    }
  }

  it('fails the bootstrap of forRoot() with an unknown key', async () => {
    const error = await bootstrapFailure(
      RedisLockModule.forRoot(loose({ redis: server.url, keyPrefix: 'orders:' })),
    );
    expect(error).toBeInstanceOf(RedisLockConfigError);
    expect((error as Error).message).toMatch(/did you mean `prefix`\?/);
  });

  it('fails the bootstrap of forRootAsync() whose factory returns an unknown key', async () => {
    const error = await bootstrapFailure(
      RedisLockModule.forRootAsync({
        useFactory: () => loose({ redis: server.url, comandTimeout: 500 }),
      }),
    );
    expect(error).toBeInstanceOf(RedisLockConfigError);
    expect((error as Error).message).toMatch(/`comandTimeout`.*did you mean `commandTimeout`\?/);
  });

  it('still accepts isGlobal, which belongs to the module definition', async () => {
    expect(
      await bootstrapFailure(RedisLockModule.forRoot({ redis: server.url, isGlobal: false })),
    ).toBeUndefined();
  });
});

describe('an unreachable Redis', () => {
  const commandTimeout = 500;
  const wait = 1_000;
  let locks: LockService;

  beforeAll(async () => {
    // A port nothing listens on: connections are refused and ioredis keeps reconnecting.
    const port = await freePort();
    locks = services.create({ redis: `redis://127.0.0.1:${port}`, commandTimeout });
  });

  it.each([
    ['acquire', () => locks.acquire('k', { wait })],
    ['tryAcquire', () => locks.tryAcquire('k')],
    ['withLock', () => locks.withLock('k', jest.fn(), { wait })],
    ['isLocked', () => locks.isLocked('k')],
    ['forceRelease', () => locks.forceRelease('k')],
  ])('fails %s with RedisUnavailableError within wait + commandTimeout', async (_, call) => {
    const started = now();
    expect(await failureOf(call)).toBeInstanceOf(RedisUnavailableError);
    expect(now() - started).toBeLessThan(wait + commandTimeout + 500);
  });

  it('closes without hanging', async () => {
    const started = now();
    await locks.close();
    expect(now() - started).toBeLessThan(1_000);
    // ioredis arms a timer (its `disconnectTimeout`, 200 ms on the connections the library opens)
    // to destroy a socket that never connected; let it run out here, in this file.
    await sleep(300);
  });
});
