/**
 * Semaphores on one Redis, in one process (the cross-process bound is semaphore-fuzz): N holders
 * at once and no more, the busy reply, wake-ups by the release message, the limit agreed by every
 * holder, re-entrancy, renewal and loss, and a TTL on every key written (fair mode:
 * semaphore-fair).
 */
import {
  LockLostError,
  LockNotAcquiredError,
  LockUpgradeError,
  RedisLockConfigError,
  SemaphoreLimitConflictError,
} from 'nestjs-redis-lock';
import { RedisBackend } from '../../lib/backends/redis.backend';
import { lockRedisKeys } from '../../lib/keys/lock-keys';
import { onSharedRedis } from '../support/lock-services';
import { now, sleep, waitFor } from '../support/time';

const { prefix, redis, services } = onSharedRedis('semaphore');
/** The permits' sorted set: the lock's own name, which every kind of lock on the key holds. */
const permitsKey = (key: string): string => `${prefix}{${key}}`;
/** The semaphore's companion `name` (limit, fence, holders, queue), apart from the mutex's. */
const permitName = (key: string, name: string): string => `${prefix}{${key}}:permits:${name}`;

/** Every key of `key`'s locks and its PTTL (-1: none). */
async function ttls(key: string): Promise<Record<string, number>> {
  const keys = await redis.keys(`${prefix.replace(/[*?[\]\\]/g, '\\$&')}{${key}}*`);
  const found: Record<string, number> = {};
  for (const key of keys) found[key] = await redis.pttl(key);
  return found;
}

describe('N holders at once', () => {
  it('grants N permits, each with its own token and increasing fence, then answers busy', async () => {
    const locks = services.create({ ttl: 5_000 });
    const held = [
      await locks.acquire('three', { permits: 3 }),
      await locks.acquire('three', { permits: 3 }),
      await locks.acquire('three', { permits: 3 }),
    ];
    expect(new Set(held.map((lock) => lock.token)).size).toBe(3);
    expect(held[1]!.fence).toBeGreaterThan(held[0]!.fence);
    expect(held[2]!.fence).toBeGreaterThan(held[1]!.fence);
    expect(await locks.tryAcquire('three', { permits: 3 })).toBeNull();
    expect(await redis.zcard(permitsKey('three'))).toBe(3);
    await held[0]!.release();
    const fourth = await locks.tryAcquire('three', { permits: 3 });
    expect(fourth).not.toBeNull();
    await Promise.all([...held.slice(1), fourth!].map((lock) => lock.release()));
    expect(await redis.exists(permitsKey('three'), permitName('three', 'limit'))).toBe(0);
  });

  it('answers busy with the ms until the soonest permit lease ends (LockNotAcquiredError.retryAfterMs)', async () => {
    const locks = services.create();
    const long = await locks.acquire('soonest', { permits: 2, ttl: 20_000, renew: false });
    const short = await locks.acquire('soonest', { permits: 2, ttl: 1_500, renew: false });
    const busy = await locks.acquire('soonest', { permits: 2 }).catch((e: unknown) => e);
    expect(busy).toBeInstanceOf(LockNotAcquiredError);
    const { retryAfterMs } = busy as LockNotAcquiredError;
    expect(retryAfterMs).toBeGreaterThan(0);
    expect(retryAfterMs).toBeLessThanOrEqual(1_500);
    await Promise.all([long.release(), short.release()]);
  });

  it('wakes a waiter by the release message, long before its fallback (the holders’ 10 s leases)', async () => {
    const holder = services.create({ ttl: 10_000 });
    const waiting = services.create({ ttl: 10_000 });
    const held = await Promise.all([1, 2].map(() => holder.acquire('wake', { permits: 2 })));
    const started = now();
    const waiter = waiting.acquire('wake', { permits: 2, wait: 8_000 });
    await sleep(200);
    const releasedAt = now();
    await held[0]!.release();
    const woken = await waiter;
    const tookAfterRelease = now() - releasedAt;
    expect(releasedAt - started).toBeGreaterThanOrEqual(150); // it did wait for the release
    expect(tookAfterRelease).toBeLessThan(3_000); // a fallback would have slept ~10 s
    await Promise.all([woken.release(), held[1]!.release()]);
  });

  it('takes the place of a holder that stopped renewing once its lease ends', async () => {
    const locks = services.create();
    const stale = await locks.acquire('lapse', { permits: 1, ttl: 300, renew: false });
    const started = now();
    const next = await locks.acquire('lapse', { permits: 1, wait: 3_000 });
    expect(now() - started).toBeGreaterThanOrEqual(200);
    expect(await stale.release()).toBe(false); // its place was taken: not ours any more
    await next.release();
  });
});

describe('the limit N', () => {
  it('refuses a holder naming another N while the key is held, and accepts it once free', async () => {
    const a = services.create();
    const b = services.create();
    const held = await a.acquire('limit', { permits: 2 });
    const refused = await b.acquire('limit', { permits: 3, wait: 1_000 }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(SemaphoreLimitConflictError);
    expect(refused).toBeInstanceOf(RedisLockConfigError);
    expect(refused).toMatchObject({ heldPermits: 2, requestedPermits: 3 });
    expect((refused as Error).message).toMatch(/must name the same `permits`/);
    await held.release();
    const now3 = await b.acquire('limit', { permits: 3 });
    await now3.release();
  });

  it.each([0, -1, 1.5, NaN, Infinity, '3'])(
    'refuses permits: %p with RedisLockConfigError, before any command',
    async (permits) => {
      const locks = services.create();
      await expect(
        locks.acquire('bad', { permits: permits as unknown as number }),
      ).rejects.toBeInstanceOf(RedisLockConfigError);
      await expect(
        locks.withLock('bad', () => 1, { permits: permits as unknown as number }),
      ).rejects.toThrow(/`permits`/);
    },
  );

  it.each([
    [{ writerPriority: true }, /`writerPriority`.*semaphore.*no readers or writers/],
    [{ writerPriority: false }, /`writerPriority`.*semaphore.*no readers or writers/],
    [{ mode: 'write' as const }, /`mode: 'write'`.*semaphore.*no readers or writers/],
    [{ mode: 'read' as const }, /`mode: 'read'`.*semaphore.*no readers or writers/],
  ])(
    'refuses %p beside permits, in plain and fair mode, with a message about semaphores',
    async (option, message) => {
      for (const locks of [services.create(), services.create({ fair: true })]) {
        let ran = false;
        const calls: Promise<unknown>[] = [
          locks.acquire('bad', { permits: 3, ...option }),
          locks.tryAcquire('bad', { permits: 3, ...option }),
          locks.withLock('bad', () => (ran = true), { permits: 3, ...option }),
        ];
        for (const call of calls) {
          await expect(call).rejects.toBeInstanceOf(RedisLockConfigError);
          await expect(call).rejects.toThrow(message);
        }
        expect(ran).toBe(false);
        expect(await locks.isLocked('bad')).toBe(false);
      }
    },
  );
});

describe('re-entrancy', () => {
  it('re-uses the held permit in a nested call on the same key', async () => {
    const locks = services.create();
    await locks.withLock(
      'nested',
      async (outer) => {
        await locks.withLock(
          'nested',
          async (inner) => {
            expect(inner.token).toBe(outer.token);
            expect(await redis.zcard(permitsKey('nested'))).toBe(1);
          },
          { permits: 2 },
        );
        expect(outer.isHeld).toBe(true);
      },
      { permits: 2 },
    );
    expect(await redis.exists(permitsKey('nested'))).toBe(0);
  });

  it('takes a second permit with reentrant: false, and refuses the mutex on the key inside', async () => {
    const locks = services.create();
    await locks.withLock(
      'two-locks',
      async (outer) => {
        await locks.withLock(
          'two-locks',
          async (inner) => {
            expect(inner.token).not.toBe(outer.token);
            expect(await redis.zcard(permitsKey('two-locks'))).toBe(2);
          },
          { permits: 2, reentrant: false },
        );
        // The mutex on the key would wait for the chain's own permit: refused at once.
        await expect(locks.withLock('two-locks', () => undefined)).rejects.toBeInstanceOf(
          LockUpgradeError,
        );
        await expect(locks.tryAcquire('two-locks')).rejects.toBeInstanceOf(LockUpgradeError);
      },
      { permits: 2 },
    );
  });

  it('refuses a nested call naming another N', async () => {
    const locks = services.create();
    await locks.withLock(
      'nested-limit',
      async () => {
        await expect(
          locks.withLock('nested-limit', () => 1, { permits: 3 }),
        ).rejects.toBeInstanceOf(SemaphoreLimitConflictError);
      },
      { permits: 2 },
    );
  });
});

describe('renewal, loss, events', () => {
  it('renews each permit (watchdog) past its ttl, and reports its loss on the signal', async () => {
    // A lease long enough that a late watchdog tick on a loaded machine does not lose it.
    const locks = services.create({ ttl: 600 });
    const events: string[] = [];
    locks.on('acquired', ({ key }) => events.push(`acquired ${key}`));
    locks.on('lost', (error) => events.push(`lost ${error.reason}`));
    const [a, b] = await Promise.all([1, 2].map(() => locks.acquire('renew', { permits: 2 })));
    await sleep(1_500); // 2.5 leases: held only if each permit was renewed
    expect([a!.isHeld, b!.isHeld]).toEqual([true, true]);
    expect(await redis.zcard(permitsKey('renew'))).toBe(2);
    await redis.zrem(permitsKey('renew'), a!.token); // an operator removed one permit
    await waitFor(() => a!.signal.aborted, 3_000);
    expect(a!.signal.reason).toBeInstanceOf(LockLostError);
    expect(b!.isHeld).toBe(true);
    await b!.release();
    expect(events).toEqual(['acquired renew', 'acquired renew', 'lost not-owner']);
  });

  it('cancels a waiting permit call by AbortSignal, and bounds a permit by maxHold', async () => {
    const locks = services.create({ ttl: 5_000 });
    const held = await locks.acquire('bounds', { permits: 1, maxHold: 400 });
    const controller = new AbortController();
    const waiting = locks.acquire('bounds', {
      permits: 1,
      wait: 10_000,
      signal: controller.signal,
    });
    setTimeout(() => controller.abort(new Error('user left')), 100);
    await expect(waiting).rejects.toThrow('user left');
    expect(await redis.zcard(permitsKey('bounds'))).toBe(1); // the cancelled call took nothing
    await waitFor(() => held.signal.aborted, 3_000);
    expect(held.signal.reason).toMatchObject({ reason: 'max-hold' });
    // maxHold released the permit: the place is free again at once.
    const next = await locks.acquire('bounds', { permits: 1, wait: 2_000 });
    await next.release();
  });
});

describe('keys', () => {
  it('gives every key a TTL while held, after extend() and after release; only the counter stays', async () => {
    const locks = services.create({ ttl: 2_000, fenceRetention: 1_000 });
    const held = await Promise.all([1, 2].map(() => locks.acquire('ttl', { permits: 2 })));
    const whileHeld = await ttls('ttl');
    await held[0]!.extend(30_000);
    const afterExtend = await ttls('ttl');
    await Promise.all(held.map((lock) => lock.release()));
    const afterRelease = await ttls('ttl');
    const names = [
      permitsKey('ttl'),
      ...['limit', 'fence', 'holders'].map((s) => permitName('ttl', s)),
    ];
    expect(Object.keys(whileHeld).sort()).toEqual([...names].sort());
    for (const pttl of Object.values({ ...whileHeld, ...afterExtend, ...afterRelease })) {
      expect(pttl).toBeGreaterThan(0);
    }
    // The sorted set follows its latest lease; the counter outlives it by fenceRetention.
    expect(afterExtend[permitsKey('ttl')]).toBeGreaterThan(20_000);
    // The holder records live exactly as long as the set (the same PEXPIRE, the same script).
    expect(afterExtend[permitName('ttl', 'holders')]).toBeGreaterThan(20_000);
    expect(afterExtend[permitName('ttl', 'fence')]).toBeGreaterThan(30_000);
    expect(Object.keys(afterRelease)).toEqual([permitName('ttl', 'fence')]);
    await redis.del(permitName('ttl', 'fence'));
  });

  it('leaves nothing under the prefix once every permit is released, within ttl + fenceRetention', async () => {
    const ttl = 500;
    const fenceRetention = 300;
    const bulk = `${prefix}bulk:`;
    const locks = services.create({ prefix: bulk, ttl, fenceRetention });
    await Promise.all(
      Array.from({ length: 50 }, async (_, i) => {
        const key = `tenant:${i % 10}`;
        await locks.withLock(key, () => sleep(5), { permits: 2, wait: 5_000 });
      }),
    );
    const released = now();
    expect((await redis.keys(`${bulk}*`)).length).toBeGreaterThan(0); // the counters, expiring
    await waitFor(
      async () => (await redis.keys(`${bulk}*`)).length === 0,
      ttl + fenceRetention + 2_000,
    );
    expect(now() - released).toBeLessThan(ttl + fenceRetention + 2_000);
  });

  it('lets operators count, inspect and remove a semaphore’s permits through the backend', async () => {
    const locks = services.create({ ttl: 5_000 });
    const backend = new RedisBackend({ client: redis, owned: false }, 1_000, 1_000);
    const keys = lockRedisKeys(prefix, 'admin', { type: 'semaphore', permits: 2 });
    expect(await backend.isLocked(keys)).toBe(false);
    const held = await locks.acquire('admin', { permits: 2 });
    expect(await backend.isLocked(keys)).toBe(true);
    expect((await backend.inspectRaw(keys)).semaphore).toMatchObject({
      limit: 2,
      fence: held.fence,
    });
    const permit = {
      fence: held.fence,
      count: 1,
      holders: [expect.objectContaining({ instanceId: expect.any(String) })],
    };
    expect(await backend.evict(keys)).toEqual({
      kind: 'semaphore',
      ...permit,
      removed: { semaphore: permit },
    });
    expect(await backend.isLocked(keys)).toBe(false);
    expect(await backend.forceRelease(keys)).toBe(false);
    await waitFor(() => held.signal.aborted, 5_000, 50); // found gone at its next renewal
    await backend.close();
  });
});
