/**
 * Inspecting and freeing locks against real Redis: what `inspect` reads (held, ttl, fence, holder
 * and since, fair waiters), how the holder record follows the lease (renewed, removed, handed
 * over), paged listing (one Redis, Redlock, a Cluster), and a forced release that the holder
 * notices at its next renewal.
 */
import { hostname } from 'node:os';
import { Logger } from '@nestjs/common';
import type Redis from 'ioredis';
import type { LockHandle, LockService, RedisLockModuleOptions } from 'nestjs-redis-lock';
import { lockServices, onSharedRedis } from './support/lock-services';
import { redisClient } from './support/shared-redis';
import type { RedisServer } from './support/redis-server';
import { sleep, waitFor } from './support/time';
import {
  nodeClient,
  startCluster,
  startIndependentPrimaries,
  type RedisClusterTopology,
} from './support/topologies';
import { uniquePrefix } from './support/unique-prefix';

/** Every page of `locks.list()`, `count` at a time: the keys listed, and how many pages. */
async function listAll(locks: LockService, count: number) {
  const keys: string[] = [];
  let pages = 0;
  let cursor: string | undefined;
  do {
    const page = await locks.list({ cursor, count });
    keys.push(...page.locks.map((lock) => lock.key));
    cursor = page.cursor;
    pages++;
  } while (cursor !== undefined);
  return { keys: [...new Set(keys)].sort(), pages };
}

describe('on one Redis', () => {
  const { prefix, redis, services, keyOf } = onSharedRedis('inspect');

  it('reads held, ttl, fence and holder (instance id, since); a free lock is just not held', async () => {
    const locks = services.create({ instanceId: 'worker-a', ttl: 5_000 });
    expect(await locks.inspect('report')).toEqual({ held: false });
    const before = Date.now();
    const lock = await locks.acquire('report');
    const after = Date.now();
    const info = await locks.inspect('report');
    expect(info).toEqual({
      held: true,
      kind: 'exclusive',
      ttlMs: expect.any(Number),
      fence: lock.fence,
      holder: { instanceId: 'worker-a', since: expect.any(Number) },
    });
    expect(info.ttlMs).toBeGreaterThan(4_000);
    expect(info.ttlMs).toBeLessThanOrEqual(5_000);
    // Redis' clock, the same host's: within a few ms of ours.
    expect(info.holder!.since).toBeGreaterThanOrEqual(before - 50);
    expect(info.holder!.since).toBeLessThanOrEqual(after + 50);
    await lock.release();
    expect(await locks.inspect('report')).toEqual({ held: false });
    expect(await redis.exists(`${keyOf('report')}:holder`)).toBe(0);
  });

  it('writes the holder record in the grant itself: one command per acquire, as before', async () => {
    const client = redisClient();
    const locks = services.create({ redis: client, instanceId: 'one-trip' });
    await locks.isLocked('warm-up'); // connected, so only the grant is counted below
    const sent = jest.spyOn(client, 'sendCommand');
    const lock = await locks.tryAcquire('one-trip');
    const commands = sent.mock.calls.map(([command]) => command.name);
    sent.mockRestore();
    expect(commands).toEqual(['evalsha']);
    expect((await locks.inspect('one-trip')).holder?.instanceId).toBe('one-trip');
    await lock!.release();
    await services.closeAll();
    await client.quit();
  });

  it('defaults the instance id to <hostname>:<pid>', async () => {
    const locks = services.create();
    const lock = await locks.acquire('default-id');
    const { holder } = await locks.inspect('default-id');
    expect(holder?.instanceId).toBe(`${hostname()}:${process.pid}`);
    await lock.release();
  });

  it('reads the holder from the lock itself, the same across renewals, with no record beside it', async () => {
    const locks = services.create({ instanceId: 'renewer', ttl: 600 });
    const lock = await locks.acquire('renewed');
    const first = await locks.inspect('renewed');
    await sleep(1_000); // several renewals (every ttl / 3)
    const later = await locks.inspect('renewed');
    expect(later.holder).toEqual(first.holder);
    expect(later.holder).toMatchObject({ instanceId: 'renewer' });
    expect(await redis.exists(`${keyOf('renewed')}:holder`)).toBe(0);
    await lock.release();
  });

  it('lists the queued waiters in fair mode, and hands the holder record over with the lock', async () => {
    const fairPrefix = `${prefix}fair:`;
    const options = (instanceId: string): RedisLockModuleOptions => ({
      prefix: fairPrefix,
      fair: true,
      instanceId,
      ttl: 5_000,
    });
    const holder = await services.create(options('holder')).acquire('seat');
    const first = services.create(options('first')).acquire('seat', { wait: 10_000 });
    const reader = services.create(options('reader'));
    await waitFor(async () => (await reader.inspect('seat')).waiters?.length === 1, 5_000, 5);
    const second = services.create(options('second')).acquire('seat', { wait: 10_000 });
    await waitFor(async () => (await reader.inspect('seat')).waiters?.length === 2, 5_000, 5);
    const queued = await reader.inspect('seat');
    expect(queued.holder?.instanceId).toBe('holder');
    expect(queued.waiters?.map((waiter) => waiter.instanceId)).toEqual(['first', 'second']);
    expect(queued.waiters![0]!.since).toBeLessThanOrEqual(queued.waiters![1]!.since);
    // Its holder has held since the hand-off, not since its call began (which its token carries).
    await sleep(200);
    const handOffAfter = Date.now();
    await holder.release();
    const handedOver = await first;
    const afterHandOff = await reader.inspect('seat');
    expect(afterHandOff.fence).toBe(handedOver.fence);
    expect(afterHandOff.holder?.instanceId).toBe('first');
    expect(afterHandOff.holder!.since).toBeGreaterThanOrEqual(handOffAfter - 50);
    expect(afterHandOff.waiters?.map((waiter) => waiter.instanceId)).toEqual(['second']);
    // The hand-off's short lease and the record expire together.
    const [lockTtl, recordTtl] = await Promise.all([
      redis.pttl(`${fairPrefix}{seat}`),
      redis.pttl(`${fairPrefix}{seat}:holder`),
    ]);
    expect(Math.abs(lockTtl - recordTtl)).toBeLessThan(250);
    await handedOver.release();
    await (await second).release();
  });

  it('pages through more locks than one page holds, keys exactly as the application named them', async () => {
    const locks = services.create({ prefix: `${prefix}many:`, instanceId: 'lister' });
    const names = Array.from({ length: 25 }, (_, i) => `job:${i}`);
    names.push('{braced}', '}closing', 'with space', 'a*glob?');
    const held = await Promise.all(names.map((name) => locks.acquire(name)));
    const { keys, pages } = await listAll(locks, 10);
    expect(keys).toEqual([...names].sort());
    expect(pages).toBeGreaterThan(1);
    const page = await locks.list({ count: 100 });
    const entry = page.locks.find((lock) => lock.key === '{braced}');
    expect(entry).toMatchObject({ held: true, holder: { instanceId: 'lister' } });
    // Another prefix's locks, and a prefix that only starts like this one, are not listed.
    const other = await services.create({ prefix: `${prefix}many-not:` }).acquire('job:0');
    expect((await listAll(locks, 10)).keys).toHaveLength(names.length);
    await Promise.all([...held, other].map((lock) => lock.release()));
    expect((await listAll(locks, 10)).keys).toEqual([]);
  });

  it('evicts a lock: reports the holder and fence removed, and the holder loses it at its next renewal', async () => {
    const holderService = services.create({ instanceId: 'victim', ttl: 900 });
    const lock: LockHandle = await holderService.acquire('stuck');
    const operator = services.create({ instanceId: 'operator' });
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    try {
      const evicted = await operator.evict('stuck');
      const holder = { instanceId: 'victim', since: expect.any(Number) };
      expect(evicted).toEqual({
        kind: 'exclusive',
        fence: lock.fence,
        count: 1,
        holder,
        removed: { exclusive: { fence: lock.fence, count: 1, holders: [holder] } },
      });
      expect(await operator.inspect('stuck')).toEqual({ held: false });
      expect(lock.signal.aborted).toBe(false); // nothing tells it before its renewal
      await waitFor(() => lock.signal.aborted, 2_000, 10); // renewal every 300 ms
      expect(await operator.evict('stuck')).toBeNull();
    } finally {
      await lock.release().catch(() => undefined);
      warn.mockRestore();
    }
  });

  it('still works beside a version that writes no holder record (a rolling deploy)', async () => {
    const locks = services.create({ instanceId: 'new' });
    // An older process's grant: the lease and its counter, no record of its own — only one left
    // by an earlier grant that an older process force-released (it deletes the lock key only).
    await redis.set(keyOf('mixed'), 'old-token', 'PX', 5_000);
    await redis.set(`${keyOf('mixed')}:fence`, '41', 'PX', 65_000);
    await redis.set(`${keyOf('mixed')}:holder`, '1700000000000 evicted-token ghost', 'PX', 5_000);
    expect(await locks.inspect('mixed')).toEqual({
      held: true,
      kind: 'exclusive',
      ttlMs: expect.any(Number),
      fence: 41,
    });
    expect(await locks.tryAcquire('mixed')).toBeNull();
    expect(await locks.evict('mixed')).toEqual({
      kind: 'exclusive',
      fence: 41,
      count: 1,
      removed: { exclusive: { fence: 41, count: 1, holders: [] } },
    });
    const lock = await locks.acquire('mixed');
    expect(lock.fence).toBe(42);
    expect((await locks.inspect('mixed')).holder?.instanceId).toBe('new');
    await lock.release();
  });
});

describe('under Redlock (3 independent primaries)', () => {
  const prefix = uniquePrefix('inspect-redlock');
  const services = lockServices({ prefix });
  let nodes: RedisServer[];
  let clients: Redis[];

  beforeAll(async () => {
    nodes = await startIndependentPrimaries(3);
    clients = nodes.map((node) => nodeClient(node.port));
  });

  afterAll(async () => {
    await services.closeAll();
    clients?.forEach((client) => client.disconnect());
    await Promise.all((nodes ?? []).map((node) => node.stop()));
  });

  it('reads a lock held by a quorum, ignores a minority stale key, lists and evicts', async () => {
    const redlock = { nodes: nodes.map((node) => node.url), restartGrace: 0 };
    const locks = services.create({ redlock, instanceId: 'quorum' });
    const lock = await locks.acquire('shared');
    const info = await locks.inspect('shared');
    expect(info).toMatchObject({ held: true, fence: lock.fence, holder: { instanceId: 'quorum' } });
    // A key on one node only is no lock.
    await clients[0]!.set(`${prefix}{minority}`, 'stale', 'PX', 5_000);
    expect(await locks.inspect('minority')).toEqual({ held: false });
    expect((await listAll(locks, 10)).keys).toEqual(['shared']);
    expect(await locks.evict('shared')).toMatchObject({ holder: { instanceId: 'quorum' } });
    expect(await locks.inspect('shared')).toEqual({ held: false });
    await lock.release().catch(() => undefined);
  });
});

describe('on a Redis Cluster (3 primaries)', () => {
  const prefix = uniquePrefix('inspect-cluster');
  const services = lockServices({ prefix });
  let topology: RedisClusterTopology;

  beforeAll(async () => {
    jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    topology = await startCluster({ primaries: 3, replicasPerPrimary: 0 });
  }, 60_000);

  afterAll(async () => {
    await services.closeAll();
    await topology?.stop();
    jest.restoreAllMocks();
  });

  it('lists the locks of every primary, page by page, and inspects them without CROSSSLOT', async () => {
    const locks = services.create({ cluster: { nodes: topology.startupNodes }, fair: true });
    const names = Array.from({ length: 30 }, (_, i) => `shard:${i}`);
    const held = await Promise.all(names.map((name) => locks.acquire(name)));
    const { keys, pages } = await listAll(locks, 4);
    expect(keys).toEqual([...names].sort());
    expect(pages).toBeGreaterThan(3);
    // A new client, whose first command is the listing: it must still find every primary.
    const fresh = services.create({ cluster: { nodes: topology.startupNodes } });
    expect((await listAll(fresh, 100)).keys).toEqual([...names].sort());
    expect((await locks.inspect('shard:7')).fence).toBe(held[7]!.fence);
    expect(await locks.evict('shard:7')).toMatchObject({ fence: held[7]!.fence });
    await Promise.all(held.map((lock) => lock.release().catch(() => undefined)));
  });
});
