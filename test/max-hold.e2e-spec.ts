/**
 * `maxHold` bounds how long a lock is held, however long the work runs: when it is reached the
 * watchdog stops renewing, the signal aborts with `LockLostError` (reason `'max-hold'`), the loss
 * is reported like any other, and the key is released so the next holder need not wait out the
 * lease. Without it (the default) a lock is renewed for as long as its work runs.
 */
import { Injectable } from '@nestjs/common';
import {
  currentLock,
  LockLostError,
  Locked,
  LockService,
  RedisLockConfigError,
  type LockHandle,
} from 'nestjs-redis-lock';
import type { HeldLock } from '../lib/engine/held-lock';
import { createDecoratorApp } from './decorator/decorator-app';
import { onSharedRedis } from './support/lock-services';
import { SHARED_REDIS_URL } from './support/shared-redis';
import { closeAllProxies, startTcpProxy } from './support/tcp-proxy';
import { now, sleep, waitFor } from './support/time';

const { prefix, redis, services, keyOf } = onSharedRedis('max-hold');
const TTL = 600;

/** Resolves when the signal aborts, or after `ms` with `undefined` (a bounded wait). */
function aborted(lock: LockHandle, ms: number): Promise<unknown> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(undefined), ms);
    lock.signal.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        resolve(lock.signal.reason);
      },
      { once: true },
    );
  });
}

it('stops renewing at maxHold, aborts the signal, reports the loss and releases the key', async () => {
  const locks = services.create({ ttl: TTL });
  const other = services.create();
  const lost: LockLostError[] = [];
  locks.on('lost', (error) => void lost.push(error));
  const started = now();
  let abortedAfter = -1;
  let takenOver = false;

  const run = locks.withLock(
    'bounded',
    async (lock) => {
      const reason = await aborted(lock, 3_000); // the work runs on, past its bound
      abortedAfter = now() - started;
      expect(reason).toBeInstanceOf(LockLostError);
      expect((reason as LockLostError).reason).toBe('max-hold');
      // Released, not left to expire: another client gets it well within one lease.
      await waitFor(async () => {
        const next = await other.tryAcquire('bounded');
        if (next) await next.release();
        return (takenOver = next !== null);
      }, TTL / 2);
      return 'finished anyway';
    },
    { maxHold: 1_000 },
  );

  await expect(run).rejects.toMatchObject({ name: 'LockLostError', reason: 'max-hold' });
  expect(abortedAfter).toBeGreaterThanOrEqual(1_000); // renewed past its 600 ms lease until then
  expect(abortedAfter).toBeLessThan(1_000 + TTL);
  expect(takenOver).toBe(true);
  expect(lost.map((error) => error.reason)).toEqual(['max-hold']);
});

it("takes the module's maxHold by default, and a call may lift it", async () => {
  const locks = services.create({ ttl: 300, maxHold: 500 });
  const bounded = await locks.acquire('module-bound');
  const unbounded = await locks.acquire('lifted', { maxHold: Infinity });
  const reason = await aborted(bounded, 2_000);
  expect((reason as LockLostError)?.reason).toBe('max-hold');
  await sleep(700); // more than two of its leases past the module's bound
  expect(unbounded.isHeld).toBe(true);
  expect(await redis.get(keyOf('lifted'))).toBe(unbounded.token);
  expect(await bounded.release()).toBe(false);
  expect(await unbounded.release()).toBe(true);
});

it('bounds a lease that is not renewed too, releasing it at maxHold', async () => {
  const locks = services.create();
  const lock = await locks.acquire('fixed', { ttl: 10_000, renew: false, maxHold: 300 });
  const reason = await aborted(lock, 2_000);
  expect((reason as LockLostError)?.reason).toBe('max-hold');
  await waitFor(async () => (await redis.exists(keyOf('fixed'))) === 0, 1_000);
});

@Injectable()
class NightlyJob {
  /** The reason its lock's signal aborted with, if it did within 2 s. */
  reason: unknown;

  @Locked('nightly', { ttl: 300, maxHold: 500 })
  async run(): Promise<string> {
    this.reason = await aborted(currentLock()!, 2_000);
    return 'finished anyway';
  }
}

it('applies maxHold given to @Locked', async () => {
  const app = await createDecoratorApp({ prefix, providers: [NightlyJob] });
  try {
    const job = app.get(NightlyJob);
    await expect(job.run()).rejects.toMatchObject({ name: 'LockLostError', reason: 'max-hold' });
    expect((job.reason as LockLostError)?.reason).toBe('max-hold');
  } finally {
    await app.close();
  }
});

it('rejects a maxHold that is not a duration a timer can wait, wherever it is given', async () => {
  for (const maxHold of [0, -1, NaN, 2 ** 31, '1000' as unknown as number]) {
    expect(() => new LockService({ maxHold })).toThrow(RedisLockConfigError);
    expect(() => Locked('k', { maxHold })).toThrow(RedisLockConfigError);
    await expect(services.create().acquire('bad', { maxHold })).rejects.toThrow(
      RedisLockConfigError,
    );
  }
  expect(() => new LockService({ maxHold: 0 })).toThrow(/`maxHold`/);
  expect(await redis.exists(keyOf('bad'))).toBe(0);
});

it('counts maxHold from when the granting command was sent: a slow reply does not stretch it', async () => {
  const proxy = await startTcpProxy(Number(new URL(SHARED_REDIS_URL).port || 6379));
  try {
    const locks = services.create({ redis: proxy.url, ttl: 5_000 });
    await locks.isLocked('slow-grant'); // connected before the delay starts
    proxy.setLatency(150); // each way: the grant's reply comes 300 ms after it was sent, or later
    const called = now();
    const lock = await locks.acquire('slow-grant', { maxHold: 1_000 });
    const replied = now(); // the grant left 300 ms before this at the latest
    // The lock may have been held from the moment the command left: the bound starts there.
    expect((lock as HeldLock).holdUntil).toBeGreaterThanOrEqual(called + 1_000);
    expect((lock as HeldLock).holdUntil).toBeLessThanOrEqual(replied - 300 + 1_000);
    const reason = await aborted(lock, 3_000);
    expect((reason as LockLostError)?.reason).toBe('max-hold');
  } finally {
    await closeAllProxies();
  }
});
