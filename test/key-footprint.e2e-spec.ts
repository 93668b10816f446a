/**
 * Every key the library writes expires: the lease, the fence counter, fair mode's queue keys — on
 * one Redis, in fair mode, under Redlock and on a Cluster. After the last release the prefix
 * empties within the lease plus `fenceRetention`, and fences keep increasing across the expiry of
 * their counter.
 */
import { Logger } from '@nestjs/common';
import type Redis from 'ioredis';
import type { LockHandle, LockService } from 'nestjs-redis-lock';
import { lockServices, onSharedRedis } from './support/lock-services';
import type { RedisServer } from './support/redis-server';
import { now, sleep, waitFor } from './support/time';
import {
  nodeClient,
  startCluster,
  startIndependentPrimaries,
  type RedisClusterTopology,
} from './support/topologies';
import { uniquePrefix } from './support/unique-prefix';

/**
 * Distinct keys locked and released in the footprint test (`FOOTPRINT_KEYS` to change it). Every
 * key is checked on its own — any key without a TTL, or with one past the bound, is left over —
 * so a burst of 10,000 proves what 100,000 does, in a tenth of the time.
 */
const FOOTPRINT_KEYS = Number(process.env.FOOTPRINT_KEYS ?? 10_000);

/** Every key under `prefix` on one node (SCAN, never KEYS). */
async function keysUnder(redis: Redis, prefix: string): Promise<string[]> {
  const pattern = `${prefix.replace(/[*?[\]\\]/g, '\\$&')}*`;
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    found.push(...keys);
    cursor = next;
  } while (cursor !== '0');
  return found;
}

/**
 * Keys under `prefix` that have no TTL (PTTL -1), with their PTTL, and how many keys were seen.
 * A key that vanished between SCAN and PTTL (-2) has no footprint and does not count.
 */
async function keysWithoutTtl(
  redis: Redis,
  prefix: string,
): Promise<{ seen: number; withoutTtl: string[] }> {
  const keys = await keysUnder(redis, prefix);
  const withoutTtl: string[] = [];
  for (const key of keys) if ((await redis.pttl(key)) === -1) withoutTtl.push(key);
  return { seen: keys.length, withoutTtl };
}

/** Runs `task(i)` for i in [0, count) with at most `parallel` in flight. */
async function inParallel(
  count: number,
  parallel: number,
  task: (i: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      while (next < count) await task(next++);
    }),
  );
}

describe('on one Redis', () => {
  const { prefix, redis, services } = onSharedRedis('footprint');

  it('gives every key of readers and permits a TTL — their holder records too — held, renewed, handed over and after', async () => {
    const kindsPrefix = `${prefix}kinds:`;
    const ttl = 600;
    const plain = services.create({ prefix: kindsPrefix, ttl, fenceRetention: 200 });
    const fair = services.create({ prefix: kindsPrefix, ttl, fenceRetention: 200, fair: true });
    const readers = await Promise.all([1, 2].map(() => plain.acquire('doc', { mode: 'read' })));
    const permits = await Promise.all([1, 2].map(() => plain.acquire('pool', { permits: 2 })));
    const fairHeld = await fair.acquire('fair-pool', { permits: 1 });
    const queued = fair.acquire('fair-pool', { permits: 1, wait: 10_000 });
    await waitFor(
      async () => (await redis.exists(`${kindsPrefix}{fair-pool}:permits:queue`)) === 1,
    );
    const whileHeld = await keysWithoutTtl(redis, kindsPrefix);
    // Renewed for more than two leases: the holder records follow their sets.
    await sleep(ttl * 2);
    const ttlsOf = (names: string[]) => Promise.all(names.map((name) => redis.pttl(name)));
    const [readersTtl, readerHoldersTtl, permitsTtl, permitHoldersTtl, limitTtl] = await ttlsOf([
      `${kindsPrefix}{doc}`,
      `${kindsPrefix}{doc}:readers:holders`,
      `${kindsPrefix}{pool}`, // the permits hold the lock's own name
      `${kindsPrefix}{pool}:permits:holders`,
      `${kindsPrefix}{pool}:permits:limit`,
    ]);
    await fairHeld.release(); // handed to the queued call
    const handedOver = await queued;
    const afterHandOff = await keysWithoutTtl(redis, kindsPrefix);
    await Promise.all([...readers, ...permits, handedOver].map((lock) => lock.release()));
    const afterRelease = await keysWithoutTtl(redis, kindsPrefix);
    // readers, their records, fence; permits, limit, records, fence (x2); fair queue, entries, ids
    expect(whileHeld.seen).toBeGreaterThanOrEqual(13);
    expect({ whileHeld, afterHandOff, afterRelease }).toEqual({
      whileHeld: { seen: whileHeld.seen, withoutTtl: [] },
      afterHandOff: { seen: afterHandOff.seen, withoutTtl: [] },
      afterRelease: { seen: afterRelease.seen, withoutTtl: [] },
    });
    const pairs: [set: number, records: number][] = [
      [readersTtl!, readerHoldersTtl!],
      [permitsTtl!, permitHoldersTtl!],
      [permitsTtl!, limitTtl!], // the limit, which tells permits from readers, follows the set
    ];
    for (const [set, records] of pairs) {
      expect(records).toBeGreaterThan(0);
      expect(Math.abs(records - set)).toBeLessThanOrEqual(ttl / 3 + 50);
    }
    // Only the fence counters remain, expiring; no holder record outlives its last holder.
    const left = await keysUnder(redis, kindsPrefix);
    expect(left.filter((name) => !name.endsWith(':fence'))).toEqual([]);
  });

  it('leaves nothing under the prefix once every lock is released, within ttl + fenceRetention', async () => {
    const ttl = 1_000;
    const fenceRetention = 500;
    const locks = services.create({ prefix: `${prefix}bulk:`, ttl, fenceRetention });
    const started = now();
    await inParallel(FOOTPRINT_KEYS, 200, async (i) => {
      const lock = await locks.acquire(`order:${i}`);
      await lock.release();
    });
    const released = now();
    const during = await keysUnder(redis, `${prefix}bulk:`);
    // The documented bound: a counter outlives its lock's last lease by fenceRetention.
    const bound = ttl + fenceRetention;
    let left = during;
    while (left.length > 0 && now() - released < bound + 2_000) {
      await sleep(100);
      left = await keysUnder(redis, `${prefix}bulk:`);
    }
    const emptiedAfter = now() - released;
    process.stdout.write(
      `footprint: ${FOOTPRINT_KEYS} keys locked and released in ${Math.round(released - started)} ms; ` +
        `${during.length} keys under the prefix just after; ${left.length} left ` +
        `${Math.round(emptiedAfter)} ms later (bound ${bound} ms)\n`,
    );
    expect({ left: left.length, sample: left.slice(0, 3) }).toEqual({ left: 0, sample: [] });
    expect(emptiedAfter).toBeLessThan(bound + 2_000);
  });

  it('gives every key a TTL while held, after an extend, and after release', async () => {
    const locks = services.create({ ttl: 2_000 });
    const held = await Promise.all(['a', 'b', 'c'].map((key) => locks.acquire(`ttl:${key}`)));
    const whileHeld = await keysWithoutTtl(redis, prefix);
    await held[0]!.extend(60_000);
    const afterExtend = await keysWithoutTtl(redis, prefix);
    await Promise.all(held.map((lock) => lock.release()));
    const afterRelease = await keysWithoutTtl(redis, prefix);
    expect(whileHeld.seen).toBeGreaterThanOrEqual(3);
    expect(afterRelease.seen).toBeGreaterThan(0); // the counters are still there, expiring
    expect({ whileHeld, afterExtend, afterRelease }).toEqual({
      whileHeld: { seen: whileHeld.seen, withoutTtl: [] },
      afterExtend: { seen: afterExtend.seen, withoutTtl: [] },
      afterRelease: { seen: afterRelease.seen, withoutTtl: [] },
    });
  });

  it('keeps the fence counter alive as long as the lock, and writes no holder record: renewals and extend() carry the counter along', async () => {
    // A lease long enough that a late watchdog tick on a loaded machine does not lose it.
    const ttl = 600;
    const fenceRetention = 200;
    const locks = services.create({ ttl, fenceRetention });
    const lock = await locks.acquire('renewed');
    const lease = `${prefix}{renewed}`;
    // Held for several leases: the watchdog renews every ttl / 3, and the counter follows.
    const heldUntil = now() + 3 * ttl;
    while (now() < heldUntil) {
      await sleep(50);
      // One script: Redis reads the three PTTLs at one instant (a MULTI samples the clock per
      // command, so a millisecond could tick between them).
      const replies = (await redis.eval(
        "return { redis.call('PTTL', KEYS[1]), redis.call('PTTL', KEYS[2]), redis.call('PTTL', KEYS[3]) }",
        3,
        lease,
        `${lease}:fence`,
        `${lease}:holder`,
      )) as number[];
      const [lockTtl, fenceTtl, holderTtl] = replies;
      expect(lockTtl).toBeGreaterThan(0);
      expect(fenceTtl).toBeGreaterThanOrEqual(lockTtl!);
      // The lock's value carries its holder: no record beside it (PTTL -2: no such key).
      expect(holderTtl).toBe(-2);
    }
    expect(await redis.get(lease)).toBe(lock.token);
    await lock.extend(10_000);
    const [lockTtl, fenceTtl] = await Promise.all([
      redis.pttl(lease),
      redis.pttl(`${lease}:fence`),
    ]);
    expect(fenceTtl).toBeGreaterThan(lockTtl + fenceRetention / 2);
    await lock.release();
    // Taken again within the retention: the counter is still there, so the next fence is +1.
    const next = await locks.acquire('renewed');
    expect(next.fence).toBe(lock.fence + 1);
    await next.release();
  });

  it('still increases the fence after its counter expired (reseeded from Redis TIME)', async () => {
    const locks = services.create({ ttl: 200, fenceRetention: 100 });
    const first = await locks.acquire('reseeded');
    await first.release();
    const counter = `${prefix}{reseeded}:fence`;
    await waitFor(async () => (await redis.exists(counter)) === 0, 3_000, 20);
    const second = await locks.acquire('reseeded');
    expect(second.fence).toBeGreaterThan(first.fence);
    await second.release();
  });

  it('gives every fair-mode key a TTL: held, with a waiter queued, after the hand-off and after', async () => {
    const fairPrefix = `${prefix}fair:`;
    const holderService = services.create({ prefix: fairPrefix, fair: true, ttl: 2_000 });
    const waiterService = services.create({ prefix: fairPrefix, fair: true, ttl: 2_000 });
    const holder = await holderService.acquire('seat');
    const waiting = waiterService.acquire('seat', { wait: 10_000 });
    await waitFor(async () => (await redis.zcard(`${fairPrefix}{seat}:queue`)) === 1, 5_000, 5);
    const queued = await keysWithoutTtl(redis, fairPrefix);
    // One that gives up: its queue entry is removed, the queue keys keep their TTL.
    const impatient = await waiterService.acquire('seat', { wait: 100 }).then(
      (lock: LockHandle) => lock,
      (error: unknown) => error,
    );
    const afterGiveUp = await keysWithoutTtl(redis, fairPrefix);
    await holder.release();
    const handedOver = await waiting;
    const afterHandOff = await keysWithoutTtl(redis, fairPrefix);
    await handedOver.release();
    const afterRelease = await keysWithoutTtl(redis, fairPrefix);
    expect(impatient).toBeInstanceOf(Error);
    // lease, counter, queue, waiters, waiters' ids (a grant with no queue writes no holder record)
    expect(queued.seen).toBeGreaterThanOrEqual(5);
    // the hand-off writes the new holder's record, with the lease's TTL (checked below)
    expect(afterHandOff.seen).toBeGreaterThanOrEqual(3);
    expect({ queued, afterGiveUp, afterHandOff, afterRelease }).toEqual({
      queued: { seen: queued.seen, withoutTtl: [] },
      afterGiveUp: { seen: afterGiveUp.seen, withoutTtl: [] },
      afterHandOff: { seen: afterHandOff.seen, withoutTtl: [] },
      afterRelease: { seen: afterRelease.seen, withoutTtl: [] },
    });
  });
});

describe('under Redlock (3 independent primaries)', () => {
  const prefix = uniquePrefix('footprint-redlock');
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

  it('gives every key on every node a TTL, held and released', async () => {
    // restartGrace 0: these nodes just started, and would not vote for a grant before it passed.
    const redlock = { nodes: nodes.map((node) => node.url), restartGrace: 0 };
    const locks = services.create({ redlock });
    const held = await Promise.all(['a', 'b'].map((key) => locks.acquire(`redlock:${key}`)));
    const whileHeld = await Promise.all(clients.map((client) => keysWithoutTtl(client, prefix)));
    await Promise.all(held.map((lock) => lock.release()));
    const afterRelease = await Promise.all(clients.map((client) => keysWithoutTtl(client, prefix)));
    for (const node of whileHeld) expect(node.seen).toBeGreaterThanOrEqual(2);
    expect([...whileHeld, ...afterRelease].flatMap((node) => node.withoutTtl)).toEqual([]);
  });
});

describe('on a Redis Cluster (3 primaries)', () => {
  const prefix = uniquePrefix('footprint-cluster');
  const services = lockServices({ prefix });
  let topology: RedisClusterTopology;
  let clients: Redis[];

  beforeAll(async () => {
    // Failovers are not under test here: renewals and releases logging a slow start are noise.
    jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    topology = await startCluster({ primaries: 3, replicasPerPrimary: 0 });
    clients = topology.servers.map((server) => nodeClient(server.port));
  }, 60_000);

  afterAll(async () => {
    await services.closeAll();
    clients?.forEach((client) => client.disconnect());
    await topology?.stop();
    jest.restoreAllMocks();
  });

  const everyNode = async () => {
    const nodes = await Promise.all(clients.map((client) => keysWithoutTtl(client, prefix)));
    return {
      seen: nodes.reduce((sum, node) => sum + node.seen, 0),
      withoutTtl: nodes.flatMap((node) => node.withoutTtl),
    };
  };

  it.each([false, true])(
    'gives every key a TTL, held and released, on every shard (fair: %p)',
    async (fair) => {
      const options = {
        cluster: { nodes: topology.startupNodes },
        prefix: `${prefix}${fair}:`,
        fair,
        ttl: 2_000,
      };
      const locks: LockService = services.create(options);
      const keys = Array.from({ length: 12 }, (_, i) => `cluster:${fair}:${i}`);
      const held = await Promise.all(keys.map((key) => locks.acquire(key)));
      let queued: Promise<LockHandle> | undefined;
      if (fair) queued = services.create(options).acquire(keys[0]!, { wait: 10_000 });
      if (fair) {
        await waitFor(async () => {
          const all = await Promise.all(clients.map((client) => keysUnder(client, prefix)));
          return all.flat().some((key) => key.endsWith(':queue'));
        });
      }
      const whileHeld = await everyNode();
      await Promise.all(held.map((lock) => lock.release()));
      if (queued) await (await queued).release();
      const afterRelease = await everyNode();
      expect(whileHeld.seen).toBeGreaterThanOrEqual(2 * keys.length);
      expect({ whileHeld, afterRelease }).toEqual({
        whileHeld: { seen: whileHeld.seen, withoutTtl: [] },
        afterRelease: { seen: afterRelease.seen, withoutTtl: [] },
      });
    },
  );
});
