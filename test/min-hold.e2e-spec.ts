/**
 * `minHold`: a lock whose work ends before the minimum is not deleted but kept — its lease
 * shortened, owner-checked — until the minimum has passed, and the release counts as done for the
 * caller. Checked for every kind (mutex, write and read locks, semaphore permits, multi-key) on one
 * node, on a Cluster and (for the kinds it serves) on Redlock; the in-memory backend runs the same
 * expectations in the engine contract. Each case has its control: the same call without
 * `minHold` frees the key at once.
 */
import { Logger } from '@nestjs/common';
import {
  Locked,
  RedisLockConfigError,
  type AcquireOptions,
  type LockService,
  type RedisLockModuleOptions,
} from 'nestjs-redis-lock';
import { lockServices, warmedUp } from './support/lock-services';
import { killAllWorkers, spawnWorker } from './support/processes';
import { onOwnCluster } from './support/own-cluster';
import { stopAllRedis, type RedisServer } from './support/redis-server';
import { SHARED_REDIS_URL, deleteKeys, redisClient } from './support/shared-redis';
import { startIndependentPrimaries } from './support/topologies';
import { now, waitFor } from './support/time';
import { uniquePrefix } from './support/unique-prefix';

const MIN_HOLD = 800;
const TTL = 10_000;

/** A kind of lock, and the call on another instance that it must keep out while it is held. */
interface KindCase {
  name: string;
  /** Typed as one key for the calls below; a multi-key case returns an array (same calls). */
  key: (base: string) => string;
  holder: AcquireOptions;
  /** Refused while the holder's lock is kept. */
  rival: AcquireOptions;
}

const kinds: KindCase[] = [
  { name: 'mutex', key: (base) => base, holder: {}, rival: {} },
  { name: 'write lock', key: (base) => base, holder: { mode: 'write' }, rival: { mode: 'read' } },
  { name: 'read lock', key: (base) => base, holder: { mode: 'read' }, rival: { mode: 'write' } },
  { name: 'semaphore permit', key: (base) => base, holder: { permits: 1 }, rival: { permits: 1 } },
  {
    name: 'multi-key lock',
    key: (base) => [`${base}:a`, `${base}:b`] as unknown as string,
    holder: {},
    rival: {},
  },
];

/**
 * Runs the holder's `withLock` (work that returns at once, or throws), and checks that the rival
 * is refused right after it, and gets the lock once the minimum has passed — never before.
 */
async function expectKeptForTheMinimum(
  holder: LockService,
  rival: LockService,
  kind: KindCase,
  key: string,
  how: 'returns' | 'throws',
): Promise<void> {
  const released: unknown[] = [];
  holder.on('released', (event) => void released.push(event));
  const started = now();
  const work = holder.withLock(
    key,
    () => (how === 'throws' ? Promise.reject(new Error('job failed')) : Promise.resolve('done')),
    { ...kind.holder, ttl: TTL, minHold: MIN_HOLD },
  );
  if (how === 'throws') await expect(work).rejects.toThrow('job failed');
  else await expect(work).resolves.toBe('done');
  // The work has ended and withLock has settled: the key is still held, the release reported.
  expect(released.length).toBeGreaterThan(0);
  const early = await rival.tryAcquire(key, { ...kind.rival, ttl: TTL });
  const refusedAt = now() - started;
  if (early) await early.release();
  expect({ early: early !== null, refusedAt: refusedAt < MIN_HOLD }).toEqual({
    early: false,
    refusedAt: true,
  });
  let takenAt = 0;
  await waitFor(async () => {
    const next = await rival.tryAcquire(key, { ...kind.rival, ttl: TTL });
    if (!next) return false;
    takenAt = now() - started;
    await next.release();
    return true;
  }, MIN_HOLD + 5_000);
  // Freed by the shortened lease: not before the minimum, and long before the 10 s lease.
  expect(takenAt).toBeGreaterThanOrEqual(MIN_HOLD - 5);
  expect(takenAt).toBeLessThan(TTL);
}

/** The control: without `minHold`, the same work frees the key as it ends. */
async function expectFreedAtOnce(
  holder: LockService,
  rival: LockService,
  kind: KindCase,
  key: string,
): Promise<void> {
  await holder.withLock(key, () => Promise.resolve(), { ...kind.holder, ttl: TTL });
  const next = await rival.tryAcquire(key, { ...kind.rival, ttl: TTL });
  expect(next).not.toBeNull();
  await next?.release();
}

/** The kinds × outcomes of one store (work that throws: on one node; the path is the same). */
function kindCases(
  store: () => { holder: LockService; rival: LockService },
  served: readonly KindCase[],
  throwing = false,
): void {
  describe.each(served.map((kind) => [kind.name, kind] as const))('a %s', (_name, kind) => {
    it('is kept after work that returns at once, until the minimum has passed', async () => {
      const { holder, rival } = store();
      await expectKeptForTheMinimum(
        holder,
        rival,
        kind,
        kind.key(`returns:${kind.name}`),
        'returns',
      );
    });

    if (throwing) {
      it('is kept after work that throws before the minimum, then frees', async () => {
        const { holder, rival } = store();
        const key = kind.key(`throws:${kind.name}`);
        await expectKeptForTheMinimum(holder, rival, kind, key, 'throws');
      });
    }

    it('control: without minHold the key frees as the work ends', async () => {
      const { holder, rival } = store();
      await expectFreedAtOnce(holder, rival, kind, kind.key(`control:${kind.name}`));
    });
  });
}

describe('minHold on one Redis', () => {
  const prefix = uniquePrefix('min-hold');
  const services = lockServices({ redis: SHARED_REDIS_URL, prefix });
  const redis = redisClient();
  let holder: LockService;
  let rival: LockService;

  beforeAll(async () => {
    holder = await warmedUp(services.create());
    rival = await warmedUp(services.create());
  });
  afterAll(async () => {
    await killAllWorkers();
    await services.closeAll();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  kindCases(() => ({ holder, rival }), kinds, true);

  it('a lock whose work outlasts the minimum is deleted at once', async () => {
    await holder.withLock('long-work', () => new Promise((resolve) => setTimeout(resolve, 300)), {
      minHold: 200,
      ttl: TTL,
    });
    expect(await redis.pttl(`${prefix}{long-work}`)).toBe(-2);
  });

  it('a manual release before the minimum shortens the lease, and inspect() shows it held', async () => {
    const lock = await holder.acquire('manual', { minHold: MIN_HOLD, ttl: TTL });
    expect(await lock.release()).toBe(true);
    expect(lock.isHeld).toBe(false);
    const pttl = await redis.pttl(`${prefix}{manual}`);
    expect(pttl).toBeGreaterThan(0);
    expect(pttl).toBeLessThanOrEqual(MIN_HOLD);
    const info = await rival.inspect('manual');
    expect(info.held).toBe(true);
    expect(info.ttlMs).toBeGreaterThan(0);
    expect(info.ttlMs).toBeLessThanOrEqual(MIN_HOLD);
  });

  it('the module default applies, and a call can lift it with minHold: 0', async () => {
    const kept = services.create({ minHold: MIN_HOLD });
    await kept.withLock('module-default', () => Promise.resolve(), { ttl: TTL });
    expect(await redis.pttl(`${prefix}{module-default}`)).toBeGreaterThan(0);
    await kept.withLock('lifted', () => Promise.resolve(), { ttl: TTL, minHold: 0 });
    expect(await redis.pttl(`${prefix}{lifted}`)).toBe(-2);
  });

  it('renew: false is still released when the work returns (minHold keeps it)', async () => {
    await holder.withLock('fixed', () => Promise.resolve(), { ttl: 5_000, renew: false });
    expect(await redis.pttl(`${prefix}{fixed}`)).toBe(-2);
    await holder.withLock('fixed-kept', () => Promise.resolve(), {
      ttl: 5_000,
      renew: false,
      minHold: 5_000,
    });
    expect(await redis.pttl(`${prefix}{fixed-kept}`)).toBeGreaterThan(4_000);
  });

  it('a re-entrant call raises the minimum of the lock it joins', async () => {
    await holder.withLock(
      'nested',
      () => holder.withLock('nested', () => Promise.resolve(), { minHold: MIN_HOLD }),
      { ttl: TTL },
    );
    expect(await redis.pttl(`${prefix}{nested}`)).toBeGreaterThan(0);
  });

  it('refuses minHold above maxHold, and a bad minHold, at the call', async () => {
    await expect(holder.acquire('bad', { minHold: 2_000, maxHold: 1_000 })).rejects.toThrow(
      RedisLockConfigError,
    );
    await expect(holder.acquire('bad', { minHold: 2_000, maxHold: 1_000 })).rejects.toThrow(
      /`minHold` \(2000 ms\) is longer than `maxHold` \(1000 ms\)/,
    );
    await expect(holder.acquire('bad', { minHold: -1 })).rejects.toThrow(RedisLockConfigError);
    expect(await redis.exists(`${prefix}{bad}`)).toBe(0);
  });

  it('a holder SIGKILLed during the minimum: the key frees within the minimum, not its lease', async () => {
    const worker = spawnWorker('test/fixtures/hold-lock-worker.ts', {
      REDIS_URL: SHARED_REDIS_URL,
      PREFIX: prefix,
      KEY: 'killed',
      TTL: String(TTL),
      MIN_HOLD: String(MIN_HOLD),
      RELEASE: '1',
    });
    await worker.waitForOutput(/^released true$/m, 30_000);
    worker.kill('SIGKILL');
    await worker.exited;
    const killedAt = now();
    expect(await rival.tryAcquire('killed')).toBeNull();
    await waitFor(async () => {
      const next = await rival.tryAcquire('killed');
      return next ? next.release() : false;
    }, TTL);
    expect(now() - killedAt).toBeLessThan(MIN_HOLD);
  });

  it('control: a holder SIGKILLed during its work frees the key only at its lease', async () => {
    const worker = spawnWorker('test/fixtures/hold-lock-worker.ts', {
      REDIS_URL: SHARED_REDIS_URL,
      PREFIX: prefix,
      KEY: 'killed-working',
      TTL: String(2_000),
      MIN_HOLD: String(MIN_HOLD),
    });
    await worker.waitForOutput(/^acquired /m, 30_000);
    worker.kill('SIGKILL');
    await worker.exited;
    const pttl = await redis.pttl(`${prefix}{killed-working}`);
    // Its lease, not the minimum, bounds it: more than the minimum left, at most the 2 s lease.
    expect(pttl).toBeGreaterThan(MIN_HOLD);
    expect(pttl).toBeLessThanOrEqual(2_000);
  });

  it('refuses minHold above maxHold at startup and when the class is defined', () => {
    const bad: RedisLockModuleOptions = { minHold: 5_000, maxHold: 1_000 };
    expect(() => services.create(bad)).toThrow(RedisLockConfigError);
    expect(() => {
      class Jobs {
        @Locked('job', { onBusy: 'skip', minHold: 5_000, maxHold: 1_000 })
        async run(): Promise<void> {}
      }
      return Jobs;
    }).toThrow(/`minHold` \(5000 ms\) is longer than `maxHold` \(1000 ms\)/);
  });
});

describe('minHold on a Redis Cluster', () => {
  const cluster = onOwnCluster('min-hold-cluster');
  let holder: LockService;
  let rival: LockService;

  beforeAll(async () => {
    holder = await warmedUp(cluster.service());
    rival = await warmedUp(cluster.service());
  });

  kindCases(() => ({ holder, rival }), kinds);
});

describe('minHold on Redlock (3 primaries)', () => {
  const services = lockServices({ prefix: uniquePrefix('min-hold-redlock') });
  let nodes: RedisServer[] = [];
  let holder: LockService;
  let rival: LockService;

  beforeAll(async () => {
    jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    nodes = await startIndependentPrimaries(3);
    const redlock = { nodes: nodes.map((node) => node.url), restartGrace: 0 };
    holder = await warmedUp(services.create({ redlock }));
    rival = await warmedUp(services.create({ redlock }));
  }, 30_000);
  afterAll(async () => {
    await services.closeAll();
    await stopAllRedis();
    jest.restoreAllMocks();
  });

  // Redlock serves exclusive locks only (mutexes, writers, multi-key).
  kindCases(
    () => ({ holder, rival }),
    kinds.filter((kind) => ['mutex', 'multi-key lock'].includes(kind.name)),
  );
});
