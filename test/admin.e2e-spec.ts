/**
 * Operator tools: `isLocked` to look, `forceRelease` to un-stick a lock. A forced release wakes
 * waiters at once, and the evicted holder finds out at its next renewal (signal aborts).
 */
import { LockLostError } from 'nestjs-redis-lock';
import { now, sleep } from './support/time';
import { onSharedRedis } from './support/lock-services';

const { redis, services, keyOf } = onSharedRedis('admin');

describe('isLocked', () => {
  it('tells whether anyone holds a key right now', async () => {
    const holder = services.create();
    const observer = services.create();
    expect(await observer.isLocked('report')).toBe(false);

    const lock = await holder.acquire('report');
    expect(await observer.isLocked('report')).toBe(true);
    expect(await observer.isLocked('other-report')).toBe(false);

    await lock.release();
    expect(await observer.isLocked('report')).toBe(false);
  });

  it('reports an expired lease as free', async () => {
    const locks = services.create();
    const lock = await locks.acquire('short', { ttl: 100, renew: false });
    expect(await locks.isLocked('short')).toBe(true);
    await sleep(150);
    expect(await locks.isLocked('short')).toBe(false);
    expect(await lock.release()).toBe(false);
  });
});

describe('forceRelease', () => {
  it('resolves false when nobody holds the key', async () => {
    expect(await services.create().forceRelease('free')).toBe(false);
  });

  it('frees a held lock, wakes a waiter at once, and the old holder loses at its next renewal', async () => {
    // Every bound scales with the ttl. With 900 ms, the woken waiter took 567 ms against the
    // 450 ms of "at once" (ttl / 2) in a full run on a loaded machine; a waiter that missed the
    // message would wait for the lease end it last saw (1 to 1.5 s after its previous try).
    const ttl = 1_500;
    const holderService = services.create({ ttl });
    const waiterService = services.create();
    const operator = services.create();
    const lost = jest.fn();
    holderService.on('lost', lost);

    const holder = await holderService.acquire('stuck');
    const holderAborted = new Promise<number>((resolve) =>
      holder.signal.addEventListener('abort', () => resolve(now()), { once: true }),
    );
    // The holder keeps renewing, so only the forced release can let this waiter in.
    const waiting = waiterService
      .acquire('stuck', { wait: 10_000 })
      .then((lock) => ({ lock, at: now() }));
    await sleep(ttl * 1.2);

    const forcedAt = now();
    expect(await operator.forceRelease('stuck')).toBe(true);
    const { lock: next, at } = await waiting;
    expect(at - forcedAt).toBeLessThan(ttl / 2);

    // The evicted holder notices at its next renewal (every ttl/3), with generous slack.
    const abortedAt = await holderAborted;
    expect(abortedAt - forcedAt).toBeLessThanOrEqual(ttl / 3 + 300);
    expect(holder.signal.reason).toBeInstanceOf(LockLostError);
    expect((holder.signal.reason as LockLostError).reason).toBe('not-owner');
    expect(lost).toHaveBeenCalledTimes(1);

    // …and cannot disturb the new holder.
    expect(await holder.release()).toBe(false);
    expect(await redis.get(keyOf('stuck'))).toBe(next.token);
    expect(next.fence).toBeGreaterThan(holder.fence);
    expect(await next.release()).toBe(true);
  });
});
