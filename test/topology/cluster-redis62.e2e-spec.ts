/**
 * Redis Cluster on Redis 6.2, which has no sharded pub/sub (`SPUBLISH`/`SSUBSCRIBE` arrived in
 * 7.0): locks, releases, wake-ups and fair hand-offs must work there through classic
 * `PUBLISH`/`SUBSCRIBE`, and a Cluster in the middle of an upgrade (7.0 and 6.2 primaries) must
 * use the one mode every node has — a sharded message never wakes a classic subscriber.
 *
 * The 6.2 binary is a test-only build beside the clone (`../shared/redis-versions/`), or wherever
 * `REDIS_62_SERVER_BIN` points. Without it this file fails, naming the path: a version check that
 * quietly vanishes when the binary is missing would pass while proving nothing.
 */
import { Logger } from '@nestjs/common';
import { Cluster } from 'ioredis';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { type LockHandle, LockService } from 'nestjs-redis-lock';
import { lockServices, redisKeyOf } from '../support/lock-services';
import { waitFor } from '../support/time';
import { nodeCommand, startCluster, type RedisClusterTopology } from '../support/topologies';
import { uniquePrefix } from '../support/unique-prefix';

const REDIS_62 =
  process.env.REDIS_62_SERVER_BIN ||
  resolve(__dirname, '../../../shared/redis-versions/redis-6.2.16/redis-server');
const missing = existsSync(REDIS_62)
  ? undefined
  : `Redis 6.2 server binary not found at ${REDIS_62}. Put the test-only build there ` +
    '(../shared/redis-versions/redis-6.2.16/redis-server beside the clone), or point ' +
    'REDIS_62_SERVER_BIN at one.';

/** Longer than any bound below: a waiter woken only by its fallback timer would miss them all. */
const LEASE = 60_000;
const WAIT = 30_000;
/** A waiter must hold the lock within this after the release, well before its fallback retry. */
const WAKE_BOUND = 10_000;

/** Resolves `promise`, or rejects once `ms` passed: a wake-up that came from the fallback timer. */
async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} not within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** A Cluster for one describe block: its nodes, an admin client and LockServices on it. */
function clusterFixture(bins: () => string | string[], replicasPerPrimary: number) {
  const prefix = uniquePrefix('cluster62');
  const fixture = {
    topology: undefined as unknown as RedisClusterTopology,
    admin: undefined as unknown as Cluster,
    services: lockServices({ prefix }),
    prefix,
    service: (fair = false): LockService =>
      fixture.services.create({ cluster: { nodes: fixture.topology.startupNodes }, fair }),
    /** One lock key per shard, each served by that shard's primary right now. */
    async keyPerShard(base: string): Promise<string[]> {
      const shards = await fixture.topology.shards();
      return Promise.all(
        shards.map(async (shard, index) => {
          for (let i = 0; ; i++) {
            const key = `${base}:${index}:${i}`;
            const slot = Number(await fixture.admin.cluster('KEYSLOT', redisKeyOf(prefix, key)));
            if (shard.slots.some(([from, to]) => slot >= from && slot <= to)) return key;
          }
        }),
      );
    },
    /** Subscribers of `channel` over all nodes: classic (`NUMSUB`), as a Cluster broadcasts. */
    async classicSubscribers(channel: string): Promise<number> {
      const counts = await Promise.all(
        fixture.topology.servers.map(async (node) => {
          const reply = (await nodeCommand(node.port, 'PUBSUB', 'NUMSUB', channel)) as unknown[];
          return Number(reply[1]);
        }),
      );
      return counts.reduce((sum, n) => sum + n, 0);
    },
  };
  beforeAll(async () => {
    if (missing) throw new Error(missing);
    fixture.topology = await startCluster({ primaries: 3, replicasPerPrimary, bin: bins() });
    fixture.admin = new Cluster(fixture.topology.startupNodes);
    fixture.admin.on('error', () => undefined);
  }, 60_000);
  afterAll(async () => {
    await fixture.services.closeAll();
    fixture.admin?.disconnect();
    await fixture.topology?.stop();
  });
  return fixture;
}

/** Holds `key` in one service, waits in another, releases: resolves the waiter's lock. */
async function wokenByRelease(
  fixture: ReturnType<typeof clusterFixture>,
  key: string,
): Promise<{ held: LockHandle; next: LockHandle }> {
  const held = await fixture.service().acquire(key, { ttl: LEASE });
  const waiting = fixture.service().acquire(key, { wait: WAIT });
  // Awaited below; this keeps a failure before then from also surfacing as an unhandled rejection.
  waiting.catch(() => undefined);
  // The waiter found the lock busy and listens on the lock's channel, by classic SUBSCRIBE.
  const channel = `${redisKeyOf(fixture.prefix, key)}:released`;
  await waitFor(async () => (await fixture.classicSubscribers(channel)) === 1, 10_000);
  expect(await held.release()).toBe(true);
  const next = await within(waiting, WAKE_BOUND, `waiter on "${key}" woken`);
  return { held, next };
}

/** What the library logged (each LockService says once which pub/sub mode it chose). */
const logged: string[] = [];

beforeAll(() => {
  // A library warning here would only repeat what the assertions report.
  jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  jest.spyOn(Logger.prototype, 'log').mockImplementation((message: unknown) => {
    logged.push(String(message));
  });
});
afterAll(() => jest.restoreAllMocks());

describe('Redis 6.2.16 Cluster (3 primaries + 3 replicas): classic pub/sub', () => {
  const cluster = clusterFixture(() => REDIS_62, 1);

  it('acquires and releases on every shard without an error, with and without withLock', async () => {
    const locks = cluster.service();
    for (const key of await cluster.keyPerShard('plain')) {
      const lock = await locks.acquire(key);
      expect(await lock.release()).toBe(true);
      expect(await locks.withLock(key, async (held) => held.fence)).toBe(lock.fence + 1);
      expect(await locks.isLocked(key)).toBe(false);
    }
    // It said at startup which mode it chose, and why.
    expect(logged).toContainEqual(expect.stringMatching(/no sharded pub\/sub.*classic PUBLISH/));
  });

  it('wakes a waiter on every shard by the release message, long before its fallback retry', async () => {
    for (const key of await cluster.keyPerShard('wake')) {
      const { held, next } = await wokenByRelease(cluster, key);
      expect(next.fence).toBe(held.fence + 1);
      expect(await next.release()).toBe(true);
    }
  });

  it('fair mode: hands the lock over in arrival order by grant message, on every shard', async () => {
    for (const key of await cluster.keyPerShard('fair')) {
      const queue = `${redisKeyOf(cluster.prefix, key)}:queue`;
      const holder = await cluster.service(true).acquire(key, { ttl: LEASE });
      const order: number[] = [];
      const done: Promise<void>[] = [];
      for (let i = 0; i < 3; i++) {
        const waiting = cluster.service(true).acquire(key, { wait: WAIT });
        await waitFor(async () => (await cluster.admin.zcard(queue)) === i + 1);
        const handedOver = waiting.then(async (lock) => {
          order.push(i);
          expect(await lock.release()).toBe(true);
        });
        handedOver.catch(() => undefined); // awaited below, unless an earlier step failed
        done.push(handedOver);
      }
      expect(await holder.release()).toBe(true);
      // Three hand-offs, each by its grant message: one lease fallback alone would outlast this.
      await within(Promise.all(done), WAKE_BOUND, `fair hand-offs on "${key}"`);
      expect(order).toEqual([0, 1, 2]);
    }
  });
});

describe('Cluster in the middle of an upgrade (primaries on 7.0, 7.0 and 6.2)', () => {
  const cluster = clusterFixture(() => ['redis-server', 'redis-server', REDIS_62], 0);

  it('uses classic pub/sub everywhere: waiters on 7.0 and on 6.2 shards wake, releases succeed', async () => {
    for (const key of await cluster.keyPerShard('mixed')) {
      const { held, next } = await wokenByRelease(cluster, key);
      expect(next.fence).toBe(held.fence + 1);
      expect(await next.release()).toBe(true);
    }
  });
});
