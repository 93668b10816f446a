/**
 * `await using lock = await locks.acquire(key)`: every handle (a mutex, a reader's share, a permit,
 * a multi-key set, the handle a `withLock` callback gets) is async-disposable. Leaving the scope
 * releases it — also by a throw — and a release that fails never replaces the scope's own error:
 * it is logged, as `withLock` logs it. Compiled by the project's TypeScript (target ES2022, which
 * lowers `await using`) and run on the project's Node, whose `Symbol.asyncDispose` is its own (no
 * polyfill; Node 20 has the symbol but no `SuppressedError`, which TypeScript's helper stands in
 * for).
 */
import { Logger } from '@nestjs/common';
import type { AcquireOptions, LockService } from 'nestjs-redis-lock';
import { onSharedRedis } from './support/lock-services';
import { SHARED_REDIS_URL } from './support/shared-redis';
import { closeAllProxies, startTcpProxy } from './support/tcp-proxy';

const { prefix, redis, services } = onSharedRedis('await-using');
let locks: LockService;

beforeAll(() => {
  locks = services.create();
});
afterAll(closeAllProxies);
afterEach(() => jest.restoreAllMocks());

/** Whether any kind of lock holds `key` (the mutex key, a reader's share, a permit). */
const held = (key: string) => locks.isLocked(key);

describe.each<[string, AcquireOptions]>([
  ['a mutex', {}],
  ['a reader’s share', { mode: 'read' }],
  ['a semaphore permit', { permits: 2 }],
])('await using %s', (_name, options) => {
  it('releases when the scope ends', async () => {
    const key = `scope:${JSON.stringify(options)}`;
    {
      await using lock = await locks.acquire(key, options);
      expect(lock.isHeld).toBe(true);
      expect(await held(key)).toBe(true);
    }
    expect(await held(key)).toBe(false);
  });

  it('releases when the scope throws, and the scope’s own error comes out unchanged', async () => {
    const key = `throw:${JSON.stringify(options)}`;
    const failure = new Error('the work failed');
    const run = async () => {
      await using lock = await locks.acquire(key, options);
      expect(lock.isHeld).toBe(true);
      throw failure;
    };
    await expect(run()).rejects.toBe(failure);
    expect(await held(key)).toBe(false);
  });
});

it('disposes a multi-key set: every key released', async () => {
  {
    await using lock = await locks.acquire(['multi:a', 'multi:b']);
    expect(lock.keys).toEqual(['multi:a', 'multi:b']);
    expect(await held('multi:a')).toBe(true);
  }
  expect(await held('multi:a')).toBe(false);
  expect(await held('multi:b')).toBe(false);
});

it('disposes the handle a withLock callback gets: its hold ends, the lock with the last hold', async () => {
  const results = await locks.withLock('callback', async (outer) => {
    {
      await using inner = await locks.acquire('other');
      expect(inner.isHeld).toBe(true);
    }
    await outer[Symbol.asyncDispose]();
    return [outer.isHeld, await held('other')];
  });
  expect(results).toEqual([false, false]);
  expect(await held('callback')).toBe(false);
});

it('a release that fails is logged and never replaces the scope’s error', async () => {
  const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  const proxy = await startTcpProxy(Number(new URL(SHARED_REDIS_URL).port || 6379));
  const cut = services.create({ redis: proxy.url, commandTimeout: 300 });
  const failure = new Error('the work failed');
  const run = async () => {
    await using lock = await cut.acquire('unreachable', { ttl: 5_000 });
    expect(lock.isHeld).toBe(true);
    proxy.blackhole(); // the release cannot reach Redis
    throw failure;
  };
  await expect(run()).rejects.toBe(failure);
  const logged = warn.mock.calls.map(([message]) => String(message));
  expect(logged.some((line) => line.includes('unreachable') && /release/i.test(line))).toBe(true);

  // Without an error of its own, the scope still ends normally: disposal never throws.
  proxy.heal();
  const quiet = async () => {
    await using lock = await cut.acquire('unreachable-2', { ttl: 5_000, wait: 6_000 });
    proxy.blackhole();
    return lock.key;
  };
  await expect(quiet()).resolves.toBe('unreachable-2');
  proxy.heal();
  // The lease frees the key that could not be released (never a lock left forever).
  expect(await redis.pttl(`${prefix}{unreachable-2}`)).toBeLessThanOrEqual(5_000);
});
