/**
 * Fair semaphores (`fair: true` with `permits: N`) on one Redis, each waiter its own service (its
 * own connections, as in separate processes; semaphore-fair-fuzz runs real ones): arrival order,
 * no overtaking, the hand-off message, dead and departing waiters, the limit, and a TTL on every
 * key written.
 */
import {
  LockNotAcquiredError,
  SemaphoreLimitConflictError,
  type LockHandle,
  type LockService,
} from 'nestjs-redis-lock';
import { lockRedisKeys } from '../../lib/keys/lock-keys';
import { fairPermitAcquireScript } from '../../lib/kinds/semaphore/fair-permit-acquire.script';
import { onSharedRedis, warmedUp } from '../support/lock-services';
import { SHARED_REDIS_URL } from '../support/shared-redis';
import { closeAllProxies, startTcpProxy } from '../support/tcp-proxy';
import { now, sleep, waitFor } from '../support/time';

const PERMITS = 2;
const { prefix, redis, services } = onSharedRedis('sem-fair');
/** The permits' sorted set: the lock's own name, which every kind of lock on the key holds. */
const permitsKey = (key: string): string => `${prefix}{${key}}`;
/** The semaphore's companion `name` (limit, fence, holders, queue), apart from the mutex's. */
const permitName = (key: string, name: string): string => `${prefix}{${key}}:permits:${name}`;
const queueKey = (key: string): string => permitName(key, 'queue');
const fair = (options: Parameters<typeof services.create>[0] = {}): LockService =>
  services.create({ fair: true, ...options });

/** Takes all N permits of `key` through one fair service (so its releases hand them on). */
function holdAll(key: string, options: Parameters<typeof services.create>[0] = {}) {
  const holder = fair({ ttl: 30_000, ...options });
  return Promise.all(
    Array.from({ length: PERMITS }, () => holder.acquire(key, { permits: PERMITS })),
  );
}

/**
 * Starts a permit call of `service` and resolves once it is queued (the queue holds `position`
 * + 1), the acquisition wrapped (an async function would adopt the promise and wait for it).
 */
async function queuedAcquire(
  service: LockService,
  key: string,
  position: number,
  options: { wait?: number; signal?: AbortSignal } = {},
): Promise<{ acquired: Promise<LockHandle> }> {
  const acquired = service.acquire(key, { permits: PERMITS, wait: 10_000, ...options });
  acquired.catch(() => undefined); // awaited by the test when it expects a rejection
  await waitFor(async () => (await redis.zcard(queueKey(key))) === position + 1, 5_000, 2);
  return { acquired };
}

/**
 * Queues `token` for a permit of `key` as a waiter would, its entry living `lifetime` ms, and
 * never again: a waiter whose process died right after its try.
 */
async function queueVanishedWaiter(key: string, token: string, lifetime: number): Promise<void> {
  const keys = lockRedisKeys(prefix, key, { type: 'semaphore', permits: PERMITS });
  const reply = await fairPermitAcquireScript.run(
    redis,
    [
      keys.lock,
      keys.permitLimit,
      keys.fence,
      keys.queue,
      keys.waiters,
      keys.waiterIds,
      keys.permitHolders,
    ],
    [token, 30_000, PERMITS, '1', lifetime, 60_000, 'vanished-waiter'],
  );
  expect(Array.isArray(reply) && reply.length === 2).toBe(true); // busy, queued
}

/** Every key of `key`'s semaphore and its PTTL. */
async function ttls(key: string): Promise<Record<string, number>> {
  const names = await redis.keys(`${permitsKey(key).replace(/[*?[\]\\]/g, '\\$&')}*`);
  const found: Record<string, number> = {};
  for (const name of names) found[name] = await redis.pttl(name);
  return found;
}

describe('arrival order', () => {
  it('hands each freed permit to the first in line: four waiters, served in the order they queued', async () => {
    const held = await holdAll('order');
    const order: number[] = [];
    const waiters: Promise<LockHandle>[] = [];
    for (let i = 0; i < 4; i++) {
      const { acquired } = await queuedAcquire(fair(), 'order', i);
      waiters.push(acquired.then((lock) => (order.push(i), lock)));
    }
    const frees: (() => Promise<unknown>)[] = [
      () => held[0]!.release(),
      () => held[1]!.release(),
      async () => (await waiters[0]!).release(),
      async () => (await waiters[1]!).release(),
    ];
    for (const [i, free] of frees.entries()) {
      await free();
      // Handed over inside the release: the permit was never free for anyone else to take.
      expect(await redis.zcard(permitsKey('order'))).toBe(PERMITS);
      const lock = await waiters[i]!;
      expect(order).toEqual(Array.from({ length: i + 1 }, (_, n) => n));
      expect(await redis.zscore(permitsKey('order'), lock.token)).not.toBeNull();
    }
    await Promise.all(waiters.slice(2).map(async (lock) => (await lock).release()));
    expect(await redis.exists(permitsKey('order'), queueKey('order'))).toBe(0);
  });

  it('lets no newcomer overtake: tryAcquire finds no place while a waiter queues, also the instant one frees', async () => {
    const held = await holdAll('barge');
    const { acquired } = await queuedAcquire(fair(), 'barge', 0);
    const newcomer = fair();
    expect(await newcomer.tryAcquire('barge', { permits: PERMITS })).toBeNull();
    expect(await redis.zcard(queueKey('barge'))).toBe(1); // tryAcquire does not queue
    await held[0]!.release();
    expect(await newcomer.tryAcquire('barge', { permits: PERMITS })).toBeNull();
    const lock = await acquired;
    expect(lock.fence).toBeGreaterThan(held[1]!.fence);
    await lock.release();
    const last = await newcomer.tryAcquire('barge', { permits: PERMITS });
    expect(last).not.toBeNull(); // nobody queues any more: the freed place is anyone's
    await Promise.all([last!.release(), held[1]!.release()]);
  });

  it('keeps a permit freed by a lapse for the live waiter at the head, and for nobody once its entry lapsed', async () => {
    const lapsing = fair();
    const acquiredAt = now();
    const held = await Promise.all(
      [1, 2].map(() => lapsing.acquire('kept', { permits: PERMITS, ttl: 800, renew: false })),
    );
    const queuedAt = now();
    await queueVanishedWaiter('kept', 'head-token', 2_000);
    await sleep(Math.max(0, acquiredAt + 900 - now())); // both leases ended unreleased: no hand-off
    const newcomer = fair();
    // One place is kept for the head of the queue: the newcomer gets the other one only.
    const first = await newcomer.tryAcquire('kept', { permits: PERMITS });
    expect(first).not.toBeNull();
    expect(await newcomer.tryAcquire('kept', { permits: PERMITS })).toBeNull();
    await sleep(Math.max(0, queuedAt + 2_100 - now())); // the head never refreshed: it lapsed
    const second = await newcomer.tryAcquire('kept', { permits: PERMITS });
    expect(second).not.toBeNull();
    expect(await redis.exists(queueKey('kept'))).toBe(0);
    await Promise.all([first!.release(), second!.release()]);
    expect(await Promise.all(held.map((lock) => lock.release()))).toEqual([false, false]);
  });
});

describe('a lapse while waiters queue', () => {
  afterAll(() => closeAllProxies()); // also after a failure

  it('keeps the places freed by lapsed leases for the live waiters: a newcomer gets null, the waiters get them next', async () => {
    // Two slow waiters: their services reach Redis through a proxy that holds their tries back
    // from before the lapse until the newcomer was refused (their tries at the lapse would
    // otherwise take the places first). 5 s commandTimeout: a 10 s entry, not refreshed meanwhile.
    // Connected first: the holders' 1 s leases are for queueing only.
    const proxy = await startTcpProxy(Number(new URL(SHARED_REDIS_URL).port || 6379));
    const slow = () => warmedUp(fair({ redis: proxy.url, commandTimeout: 5_000 }));
    const [first, second] = [await slow(), await slow()];
    const lapsing = fair();
    const held = await Promise.all(
      [1, 2].map(() => lapsing.acquire('lapse', { permits: PERMITS, ttl: 1_000, renew: false })),
    );
    const waiters = [
      (await queuedAcquire(first, 'lapse', 0)).acquired,
      (await queuedAcquire(second, 'lapse', 1)).acquired,
    ];
    proxy.blackhole();
    try {
      // The permits' key lives exactly as long as the latest lease in it.
      await waitFor(async () => (await redis.pttl(permitsKey('lapse'))) === -2, 5_000, 2);
      const newcomer = await fair().tryAcquire('lapse', { permits: PERMITS });
      expect(newcomer?.token ?? null).toBeNull();
      // Refused while both places were free: each is kept for a waiter.
      expect(await redis.exists(permitsKey('lapse'))).toBe(0);
      expect(await redis.zcard(queueKey('lapse'))).toBe(2);
    } finally {
      proxy.heal();
    }
    const locks = await Promise.all(waiters);
    expect((await redis.zrange(permitsKey('lapse'), 0, -1)).sort()).toEqual(
      locks.map((lock) => lock.token).sort(),
    );
    expect(await Promise.all(held.map((lock) => lock.release()))).toEqual([false, false]);
    await Promise.all(locks.map((lock) => lock.release()));
    await Promise.all([first.close(), second.close()]); // before their proxy goes
  });
});

describe('wake-up by notification', () => {
  it('wakes the next in line by the hand-off message: it holds the very grant the release made', async () => {
    // A long entry lifetime (2 × commandTimeout = 20 s, refreshed every ~6.7 s): a waiter that
    // learned of its permit by a later try would be granted anew, with a higher fence.
    const held = await holdAll('wake', { commandTimeout: 10_000 });
    const { acquired } = await queuedAcquire(fair({ commandTimeout: 10_000 }), 'wake', 0);
    await held[0]!.release();
    const handedFence = Number(await redis.get(permitName('wake', 'fence')));
    const lock = await acquired;
    expect(lock.fence).toBe(handedFence);
    // Renewed at once from the short hand-off lease to its full ttl (30 s).
    await waitFor(async () => {
      const ends = Number(await redis.zscore(permitsKey('wake'), lock.token));
      const [seconds, micros] = (await redis.time()) as [number | string, number | string];
      return ends - (Number(seconds) * 1_000 + Math.floor(Number(micros) / 1_000)) > 20_000;
    }, 5_000);
    await Promise.all([lock.release(), held[1]!.release()]);
  });
});

describe('dead and departing waiters', () => {
  it('lets a dead queued waiter hold the queue up for at most its entry lifetime, not the ttl', async () => {
    // commandTimeout 300: the live waiter's entry lives 1 s, refreshed every ~333 ms.
    const held = await holdAll('dead', { commandTimeout: 300 });
    const queuedAt = now();
    await queueVanishedWaiter('dead', 'dead-token', 1_000);
    const { acquired } = await queuedAcquire(fair({ commandTimeout: 300 }), 'dead', 1);
    const releasedAt = now();
    await held[0]!.release();
    // Handed to the dead waiter (its entry was still live), no longer than its entry had left.
    const [seconds, micros] = (await redis.time()) as [number | string, number | string];
    const redisNow = Number(seconds) * 1_000 + Math.floor(Number(micros) / 1_000);
    const deadEnds = Number(await redis.zscore(permitsKey('dead'), 'dead-token'));
    expect(deadEnds - redisNow).toBeLessThanOrEqual(1_000);
    expect(await redis.zcard(permitsKey('dead'))).toBe(PERMITS);
    const lock = await acquired;
    // Never N + 1: not before the dead waiter's permit lapsed (its entry's lifetime from queueing).
    expect(now() - queuedAt).toBeGreaterThanOrEqual(1_000 - 5);
    expect(now() - releasedAt).toBeLessThan(5_000); // far from the 30 s ttl
    expect(await redis.zscore(permitsKey('dead'), 'dead-token')).toBeNull();
    await Promise.all([lock.release(), held[1]!.release()]);
  });

  it('a waiter whose budget runs out, or that is cancelled, leaves the queue; the next one is served', async () => {
    const held = await holdAll('leave');
    const budget = fair().acquire('leave', { permits: PERMITS, wait: 300 });
    await waitFor(async () => (await redis.zcard(queueKey('leave'))) === 1, 5_000, 2);
    await expect(budget).rejects.toBeInstanceOf(LockNotAcquiredError);
    await waitFor(async () => (await redis.zcard(queueKey('leave'))) === 0, 2_000, 2);

    const controller = new AbortController();
    const { acquired: cancelled } = await queuedAcquire(fair(), 'leave', 0, {
      signal: controller.signal,
    });
    const { acquired: next } = await queuedAcquire(fair(), 'leave', 1);
    controller.abort(new Error('changed my mind'));
    await expect(cancelled).rejects.toThrow('changed my mind');
    await waitFor(async () => (await redis.zcard(queueKey('leave'))) === 1, 2_000, 2);
    await held[0]!.release();
    const lock = await next;
    await Promise.all([lock.release(), held[1]!.release()]);
  });

  it('a waiter cancelled as the hand-off reaches it passes the permit on (no wait for a lapse)', async () => {
    const held = await holdAll('race');
    const controller = new AbortController();
    const { acquired: first } = await queuedAcquire(fair(), 'race', 0, {
      signal: controller.signal,
    });
    const { acquired: second } = await queuedAcquire(fair(), 'race', 1);
    const releasing = held[0]!.release();
    controller.abort(new Error('gone')); // its leave races the hand-off to it
    await releasing;
    const started = now();
    await first.then(
      (lock) => lock.release(), // it won the race: handed over before the abort
      () => undefined,
    );
    const lock = await second;
    // Had the leaver kept its hand-off, this would wait out its 4 s hand-off lease.
    expect(now() - started).toBeLessThan(2_000);
    await Promise.all([lock.release(), held[1]!.release()]);
  });
});

describe('the limit and the keys', () => {
  it('still refuses a waiter naming another N, which leaves no entry behind', async () => {
    const held = await holdAll('limit');
    const refused = await fair()
      .acquire('limit', { permits: 3, wait: 2_000 })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(SemaphoreLimitConflictError);
    expect(refused).toMatchObject({ heldPermits: PERMITS, requestedPermits: 3 });
    expect(await redis.exists(queueKey('limit'))).toBe(0);
    await Promise.all(held.map((lock) => lock.release()));
  });

  it('refuses a newcomer naming another N while no holder is left and a live waiter queues for N', async () => {
    const lapsing = fair();
    const acquiredAt = now();
    const held = await Promise.all(
      [1, 2].map(() => lapsing.acquire('asked', { permits: PERMITS, ttl: 800, renew: false })),
    );
    await queueVanishedWaiter('asked', 'head-token', 5_000);
    await sleep(Math.max(0, acquiredAt + 900 - now())); // both leases ended unreleased: no holder
    const refused = await fair()
      .tryAcquire('asked', { permits: 3 })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(SemaphoreLimitConflictError);
    expect(refused).toMatchObject({ heldPermits: PERMITS, requestedPermits: 3 });
    // CONTROL: a newcomer naming the waiter's N takes the place the head does not keep.
    const same = await fair().tryAcquire('asked', { permits: PERMITS });
    expect(same).not.toBeNull();
    await same!.release();
    expect(await Promise.all(held.map((lock) => lock.release()))).toEqual([false, false]);
  });

  it('gives every key a TTL — queue and entries while waiters queue — and leaves only the counter', async () => {
    const held = await holdAll('ttl', { fenceRetention: 1_000 });
    const { acquired } = await queuedAcquire(fair(), 'ttl', 0);
    const gaveUp = fair().acquire('ttl', { permits: PERMITS, wait: 200 });
    await expect(gaveUp).rejects.toBeInstanceOf(LockNotAcquiredError);
    const whileQueued = await ttls('ttl');
    await held[0]!.release(); // a hand-off
    const lock = await acquired;
    const afterHandOff = await ttls('ttl');
    await Promise.all([lock.release(), held[1]!.release()]);
    const afterRelease = await ttls('ttl');
    const companions = ['limit', 'fence', 'holders', 'queue', 'waiters', 'waiter-ids'];
    const names = [permitsKey('ttl'), ...companions.map((s) => permitName('ttl', s))];
    expect(Object.keys(whileQueued).sort()).toEqual([...names].sort());
    for (const pttl of Object.values({ ...whileQueued, ...afterHandOff, ...afterRelease })) {
      expect(pttl).toBeGreaterThan(0);
    }
    expect(Object.keys(afterRelease)).toEqual([permitName('ttl', 'fence')]);
    await redis.del(permitName('ttl', 'fence'));
  });
});
