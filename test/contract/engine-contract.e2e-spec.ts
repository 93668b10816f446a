/**
 * One contract of engine behaviours, through the public LockService and `@Locked`, run on both
 * backends: the shared Redis (its own key prefix) and the in-memory backend of
 * `nestjs-redis-lock/testing` — and the shared Redis once more through a node-redis client. The expectations are written once: a change that makes the memory
 * backend answer otherwise than Redis fails here, on the memory side.
 *
 * Times are real on both sides (the watchdog, waits and leases run on real timers), with margins
 * wide enough for a loaded machine.
 */
import { Injectable, type DynamicModule } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import {
  currentLock,
  Locked,
  LockLostError,
  LockNotAcquiredError,
  LockService,
  RedisLockModule,
  type LockHandle,
} from 'nestjs-redis-lock';
import { RedisLockTestingModule, type RedisLockTestingOptions } from 'nestjs-redis-lock/testing';
import { createClient } from 'redis';
import { MemoryLockBackend } from '../../lib/backends/memory.backend';
import { deleteKeys, redisClient, SHARED_REDIS_URL } from '../support/shared-redis';
import { now, sleep, waitFor } from '../support/time';
import { uniquePrefix } from '../support/unique-prefix';

/** The one thing that differs between the two runs: where the locks live. */
interface ContractBackend {
  name: string;
  /**
   * Makes standalone LockServices on one set of locks: each is what one app instance owns, so a
   * release by one reaches another's waiters only as the backend's release message.
   */
  instances(options?: RedisLockTestingOptions): () => LockService;
  /** The module an app imports to get LockService and `@Locked`. */
  module(options?: RedisLockTestingOptions): DynamicModule;
}

const prefix = uniquePrefix('engine-contract');
/** One node-redis client for every instance, as an app shares its own; its keys apart. */
const nodeRedis = createClient({ url: SHARED_REDIS_URL });
nodeRedis.on('error', () => undefined);
const onNodeRedis = {
  redis: nodeRedis,
  prefix: `${prefix}node-redis:`,
};
const backends: ContractBackend[] = [
  {
    name: 'Redis',
    instances: (options) => () => new LockService({ redis: SHARED_REDIS_URL, prefix, ...options }),
    module: (options) =>
      RedisLockModule.forRoot({ redis: SHARED_REDIS_URL, prefix, startupCheck: 'off', ...options }),
  },
  {
    name: 'memory',
    instances: (options) => {
      // One store for several services: each is given it, and so none closes it.
      const store = { backend: new MemoryLockBackend() };
      return () => new LockService(options, store);
    },
    module: (options) => RedisLockTestingModule.forRoot(options),
  },
  {
    name: 'Redis through node-redis',
    instances: (options) => () => new LockService({ ...onNodeRedis, ...options }),
    module: (options) =>
      RedisLockModule.forRoot({ ...onNodeRedis, startupCheck: 'off', ...options }),
  },
];

beforeAll(() => nodeRedis.connect());

afterAll(async () => {
  const redis = redisClient();
  await deleteKeys(redis, prefix);
  await redis.quit();
  await nodeRedis.close();
});

@Injectable()
class Jobs {
  runs = 0;

  @Locked('job', { onBusy: 'skip' })
  async skipWhenBusy(): Promise<string> {
    this.runs++;
    return 'ran';
  }

  @Locked('job')
  async throwWhenBusy(): Promise<string> {
    this.runs++;
    return 'ran';
  }

  /** Calls `inner` on the same key from inside its lock: the call chain holds it already. */
  @Locked('account:<id>')
  async outer(id: string): Promise<[number, number]> {
    return [currentLock()!.fence, await this.inner(id)];
  }

  @Locked('account:<id>')
  async inner(id: string): Promise<number> {
    void id;
    return currentLock()!.fence;
  }
}

describe.each(backends)('engine contract on $name', (backend) => {
  const services: LockService[] = [];
  const modules: TestingModule[] = [];
  let run = 0;
  /** A key no other case (on the shared Redis) uses. */
  let key: string;

  beforeEach(() => {
    key = `case-${++run}`;
  });
  afterEach(async () => {
    await Promise.all(modules.splice(0).map((moduleRef) => moduleRef.close()));
    await Promise.all(services.splice(0).map((service) => service.close()));
  });

  /** `count` app instances on one set of locks. */
  function instances(count: number, options?: RedisLockTestingOptions): LockService[] {
    const create = backend.instances(options);
    const created = Array.from({ length: count }, create);
    services.push(...created);
    return created;
  }

  function locks(options?: RedisLockTestingOptions): LockService {
    return instances(1, options)[0]!;
  }

  /** Two app instances on one set of locks. */
  function pair(options?: RedisLockTestingOptions): [LockService, LockService] {
    const [service, other] = instances(2, options);
    return [service!, other!];
  }

  async function jobs(options?: RedisLockTestingOptions) {
    const moduleRef = await Test.createTestingModule({
      imports: [backend.module(options)],
      providers: [Jobs],
    }).compile();
    modules.push(moduleRef);
    await moduleRef.init();
    return { jobs: moduleRef.get(Jobs), locks: moduleRef.get(LockService) };
  }

  it('gives each holder its own 128-bit token and a fence that increases per key', async () => {
    const service = locks();
    const first = await service.acquire(key);
    // 128 random bits, then who holds it (since, instance id), which inspection reads back.
    expect(first.token).toMatch(/^[0-9a-f]{32} \d+ \S/);
    expect(await service.tryAcquire(key)).toBeNull();
    expect(await service.isLocked(key)).toBe(true);
    expect(await first.release()).toBe(true);
    expect(await service.isLocked(key)).toBe(false);

    const second = await service.acquire(key);
    expect(second.token).not.toBe(first.token);
    expect(second.fence).toBeGreaterThan(first.fence);
    const third = await service.acquire(`${key}:other`);
    expect(third.token).not.toBe(second.token);
    await Promise.all([second.release(), third.release()]);
  });

  it('ends a lease that is not renewed at its ttl: the signal aborts and another caller gets in', async () => {
    const [service, other] = pair();
    const lock = await service.acquire(key, { ttl: 200, renew: false });
    expect(await other.tryAcquire(key)).toBeNull();
    await sleep(400);
    expect(lock.isHeld).toBe(false);
    expect(lock.signal.aborted).toBe(true);
    expect(lock.signal.reason).toMatchObject({ name: LockLostError.name, reason: 'deadline' });
    const next = await other.tryAcquire(key);
    expect(next).not.toBeNull();
    expect(await lock.release()).toBe(false);
    await next!.release();
  });

  it('minHold: work that ends sooner leaves the key held until the minimum, then it frees', async () => {
    const [service, other, inspected] = instances(3) as [LockService, LockService, LockService];
    const started = now();
    const kinds = [{}, { mode: 'read' as const }, { permits: 1 }];
    for (const [i, kind] of kinds.entries()) {
      const rival = 'mode' in kind ? { mode: 'write' as const } : kind;
      await expect(
        service.withLock(`${key}:${i}`, () => Promise.reject(new Error('failed')), {
          ...kind,
          ttl: 10_000,
          minHold: 600,
        }),
      ).rejects.toThrow('failed');
      expect(await other.tryAcquire(`${key}:${i}`, rival)).toBeNull();
      const info = await inspected.inspect(`${key}:${i}`);
      expect(info.held).toBe(true);
      expect(info.ttlMs).toBeLessThanOrEqual(600);
      await waitFor(async () => {
        const next = await other.tryAcquire(`${key}:${i}`, rival);
        return next ? next.release() : false;
      }, 5_000);
    }
    // Each key freed by its shortened lease, long before its 10 s one.
    expect(now() - started).toBeLessThan(5_000);
  });

  it('keeps a renewed lease past many ttls', async () => {
    const [service, other] = pair();
    const lock = await service.acquire(key, { ttl: 300 });
    await sleep(1_000);
    expect(lock.isHeld).toBe(true);
    expect(lock.signal.aborted).toBe(false);
    expect(await other.tryAcquire(key)).toBeNull();
    expect(await lock.release()).toBe(true);
  });

  it('aborts the signal and emits "lost" when the lock is taken over', async () => {
    const [service, other] = pair();
    const lost: [string, string][] = [];
    service.on('lost', (error, handle) => lost.push([error.reason, handle.key]));
    const lock = await service.acquire(key, { ttl: 300 });
    expect(await other.forceRelease(key)).toBe(true);
    const thief = await other.acquire(key);
    await waitFor(() => lock.signal.aborted, 3_000);
    expect(lock.signal.reason).toMatchObject({ name: LockLostError.name, reason: 'not-owner' });
    expect(lost).toEqual([['not-owner', key]]);
    expect(await lock.release()).toBe(false);
    expect(thief.isHeld).toBe(true);
    expect(await thief.release()).toBe(true);
  });

  it('wakes a waiter on release, long before the holder lease would end', async () => {
    const [service, other] = pair();
    const holder = await service.acquire(key, { ttl: 20_000 });
    const started = now();
    const waiting = other.acquire(key, { wait: 10_000 });
    await sleep(100);
    await holder.release();
    const next = await waiting;
    expect(now() - started).toBeLessThan(2_000);
    expect(next.fence).toBeGreaterThan(holder.fence);
    await next.release();
  });

  it('gives up at the wait budget with LockNotAcquiredError and the holder’s lease left', async () => {
    const [service, other] = pair();
    const holder = await service.acquire(key, { ttl: 20_000 });
    const started = now();
    const error = await other.acquire(key, { wait: 300 }).catch((e: unknown) => e);
    const waited = now() - started;
    expect(error).toBeInstanceOf(LockNotAcquiredError);
    expect(waited).toBeGreaterThanOrEqual(290);
    expect(waited).toBeLessThan(2_000);
    const { retryAfterMs } = error as LockNotAcquiredError;
    expect(retryAfterMs).toBeGreaterThan(15_000);
    expect(retryAfterMs).toBeLessThanOrEqual(20_000);
    await holder.release();
  });

  it('fair mode: hands the lock to the waiters in arrival order, fences increasing', async () => {
    const [service, ...others] = instances(4, { fair: true }) as [LockService, ...LockService[]];
    const holder = await service.acquire(key, { ttl: 20_000 });
    const order: [string, number][] = [];
    const waiters: Promise<void>[] = [];
    for (const [index, name] of ['a', 'b', 'c'].entries()) {
      waiters.push(
        others[index]!.acquire(key, { wait: 10_000 }).then(async (lock: LockHandle) => {
          order.push([name, lock.fence]);
          await sleep(20);
          await lock.release();
        }),
      );
      await sleep(100); // queued one after the other
    }
    await holder.release();
    await Promise.all(waiters);
    expect(order.map(([name]) => name)).toEqual(['a', 'b', 'c']);
    const fences = [holder.fence, ...order.map(([, fence]) => fence)];
    expect(fences).toEqual([...fences].sort((x, y) => x - y));
    expect(new Set(fences).size).toBe(4);
  });

  it('fair semaphore: hands freed permits to the waiters in arrival order, never more than N', async () => {
    const [service, ...others] = instances(4, { fair: true }) as [LockService, ...LockService[]];
    const options = { permits: 2, ttl: 20_000 };
    const held = [await service.acquire(key, options), await service.acquire(key, options)];
    const order: string[] = [];
    const waiters: Promise<LockHandle>[] = [];
    for (const [index, name] of ['a', 'b', 'c'].entries()) {
      const acquired = others[index]!.acquire(key, { ...options, wait: 10_000 });
      waiters.push(acquired.then((lock) => (order.push(name), lock)));
      await sleep(100); // queued one after the other
    }
    expect(await service.tryAcquire(key, options)).toBeNull();
    await held[0]!.release();
    const a = await waiters[0]!;
    expect(await service.tryAcquire(key, options)).toBeNull(); // handed on: never free
    await held[1]!.release();
    const b = await waiters[1]!;
    await a.release();
    const c = await waiters[2]!;
    expect(order).toEqual(['a', 'b', 'c']);
    const fences = [...held, a, b, c].map((lock) => lock.fence);
    expect(new Set(fences).size).toBe(5);
    await Promise.all([b, c].map((lock) => lock.release()));
  });

  const KIND_OPTIONS = {
    mutex: {},
    read: { mode: 'read' },
    permit: { permits: 2 },
  } as const;
  type KindName = keyof typeof KIND_OPTIONS;
  const KIND_NAMES = Object.keys(KIND_OPTIONS) as KindName[];
  const kindPairs = KIND_NAMES.flatMap((held) =>
    KIND_NAMES.filter((other) => other !== held).map((other): [KindName, KindName] => [
      held,
      other,
    ]),
  );

  it.each(kindPairs)(
    'one name: a %s holder keeps a %s out (busy, with the lease left), then lets it in',
    async (held, other) => {
      const [service, another] = pair({ ttl: 5_000 });
      const holder = await service.acquire(key, KIND_OPTIONS[held]);
      expect(await another.tryAcquire(key, KIND_OPTIONS[other])).toBeNull();
      const error: unknown = await another
        .acquire(key, { ...KIND_OPTIONS[other], wait: 100 })
        .catch((refused: unknown) => refused);
      expect(error).toBeInstanceOf(LockNotAcquiredError);
      const { retryAfterMs } = error as LockNotAcquiredError;
      // The holder's lease left — for a writer, the third of its waiting entry within which it
      // tries again (writer priority) — never a spin.
      expect(retryAfterMs).toBeGreaterThan(1_000);
      expect(retryAfterMs).toBeLessThanOrEqual(5_000);
      expect((await another.inspect(key)).kind).toBe(
        held === 'mutex' ? 'exclusive' : held === 'read' ? 'read' : 'semaphore',
      );
      // A release of one kind wakes a waiter of the other at once (one channel per name).
      const waiting = another.acquire(key, { ...KIND_OPTIONS[other], wait: 4_000 });
      await sleep(100);
      const releasedAt = now();
      expect(await holder.release()).toBe(true);
      const next = await waiting;
      expect(now() - releasedAt).toBeLessThan(1_000);
      await next.release();
    },
  );

  it('one name in fair mode: permits queue behind a mutex, and the mutex behind permits', async () => {
    const [service, another] = pair({ fair: true, ttl: 5_000 });
    const mutex = await service.acquire(key);
    expect(await another.tryAcquire(key, { permits: 2 })).toBeNull();
    const permit = another.acquire(key, { permits: 2, wait: 4_000 });
    await sleep(100);
    await mutex.release();
    const granted = await permit;
    expect(await service.tryAcquire(key)).toBeNull();
    const waiting = service.acquire(key, { wait: 4_000 });
    await sleep(100);
    await granted.release();
    await (await waiting).release();
  });

  it('onBusy: a busy @Locked method skips (resolves undefined) or throws, without running', async () => {
    const app = await jobs();
    const holder = await app.locks.acquire('job');
    expect(await app.jobs.skipWhenBusy()).toBeUndefined();
    await expect(app.jobs.throwWhenBusy()).rejects.toBeInstanceOf(LockNotAcquiredError);
    expect(app.jobs.runs).toBe(0);
    await holder.release();
    expect(await app.jobs.skipWhenBusy()).toBe('ran');
    expect(app.jobs.runs).toBe(1);
  });

  it('re-entrancy: a nested @Locked call on the same key shares the lock; off, it is busy', async () => {
    const reentrant = await jobs();
    const [outer, inner] = await reentrant.jobs.outer('1');
    expect(inner).toBe(outer);

    const strict = await jobs({ reentrant: false });
    await expect(strict.jobs.outer('2')).rejects.toBeInstanceOf(LockNotAcquiredError);
    expect(await strict.locks.isLocked('account:2')).toBe(false);
  });
});
