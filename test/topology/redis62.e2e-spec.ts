/**
 * The oldest Redis the library supports, 6.2, on every topology: a single node, Sentinel, a
 * Cluster, and a Cluster in the middle of an upgrade (7.0 and 6.2 primaries). Redis 6.2 has no
 * sharded pub/sub (`SPUBLISH`/`SSUBSCRIBE` arrived in 7.0), so on a Cluster locks, releases,
 * wake-ups and fair hand-offs must go through classic `PUBLISH`/`SUBSCRIBE`, and a mixed Cluster
 * must use the one mode every node has — a sharded message never wakes a classic subscriber.
 *
 * The 6.2 binary is a test-only build beside the clone (`../shared/redis-versions/`), or wherever
 * `REDIS_62_SERVER_BIN` points. Without it this file fails, naming the path: a version check that
 * quietly vanishes when the binary is missing would pass while proving nothing.
 */
import { Logger } from '@nestjs/common';
import { Cluster } from 'ioredis';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { type LockHandle, LockService, type RedisLockModuleOptions } from 'nestjs-redis-lock';
import { lockServices, redisKeyOf } from '../support/lock-services';
import { startRedis } from '../support/redis-server';
import { waitFor } from '../support/time';
import {
  nodeClient,
  nodeCommand,
  startCluster,
  startSentinelTopology,
  type RedisClusterTopology,
} from '../support/topologies';
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

/** What the library logged (a Cluster backend says once which pub/sub mode it chose, and why). */
const logged: string[] = [];

beforeAll(() => {
  // A library warning here would only repeat what the assertions report.
  jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  jest.spyOn(Logger.prototype, 'log').mockImplementation((message: unknown) => {
    logged.push(String(message));
  });
});
afterAll(() => jest.restoreAllMocks());

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

/** Servers started for one describe block, and how the tests reach them. */
interface Deployment {
  options: RedisLockModuleOptions;
  /** Ports whose classic (`PUBSUB NUMSUB`) subscribers are counted: the primary, or every node. */
  pubSubPorts: number[];
  /** One lock key per shard (one key on a single primary), each named after `base`. */
  keys(base: string, prefix: string): Promise<string[]>;
  zcard(redisKey: string): Promise<number>;
  stop(): Promise<void>;
}

/** Defines beforeAll/afterAll for `start`, and returns LockServices on what it started. */
function on(start: () => Promise<Deployment>) {
  const prefix = uniquePrefix('redis62');
  const services = lockServices({ prefix });
  let deployment: Deployment | undefined;
  beforeAll(async () => {
    if (missing) throw new Error(missing);
    deployment = await start();
  }, 60_000);
  afterAll(async () => {
    await services.closeAll();
    await deployment?.stop();
  });
  const fixture = {
    prefix,
    get deployment(): Deployment {
      return deployment!;
    },
    service: (fair = false): LockService => services.create({ ...deployment!.options, fair }),
    keys: (base: string): Promise<string[]> => deployment!.keys(base, prefix),
    async classicSubscribers(channel: string): Promise<number> {
      const counts = await Promise.all(
        deployment!.pubSubPorts.map(async (port) => {
          const reply = (await nodeCommand(port, 'PUBSUB', 'NUMSUB', channel)) as unknown[];
          return Number(reply[1]);
        }),
      );
      return counts.reduce((sum, n) => sum + n, 0);
    },
  };
  return fixture;
}
type Fixture = ReturnType<typeof on>;

/** Holds `key` in one service, waits in another, releases: resolves the waiter's lock. */
async function wokenByRelease(
  fixture: Fixture,
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

/** The tests every topology passes on Redis 6.2. */
function locksWakesAndHandsOver(fixture: Fixture): void {
  it('acquires, extends and releases without an error, with and without withLock', async () => {
    const locks = fixture.service();
    for (const key of await fixture.keys('plain')) {
      const lock = await locks.acquire(key);
      await lock.extend(20_000); // rejects if Redis no longer had it
      expect(lock.isHeld).toBe(true);
      expect(await lock.release()).toBe(true);
      expect(await locks.withLock(key, async (held) => held.fence)).toBe(lock.fence + 1);
      expect(await locks.isLocked(key)).toBe(false);
    }
  });

  it('wakes a waiter by the release message, long before its fallback retry', async () => {
    for (const key of await fixture.keys('wake')) {
      const { held, next } = await wokenByRelease(fixture, key);
      expect(next.fence).toBe(held.fence + 1);
      expect(await next.release()).toBe(true);
    }
  });

  it('fair mode: hands the lock over in arrival order by grant message', async () => {
    for (const key of await fixture.keys('fair')) {
      const queue = `${redisKeyOf(fixture.prefix, key)}:queue`;
      const holder = await fixture.service(true).acquire(key, { ttl: LEASE });
      const order: number[] = [];
      const done: Promise<void>[] = [];
      for (let i = 0; i < 3; i++) {
        const waiting = fixture.service(true).acquire(key, { wait: WAIT });
        await waitFor(async () => (await fixture.deployment.zcard(queue)) === i + 1);
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
}

/** A Cluster deployment: one key per shard, `NUMSUB` counted over every node. */
async function clusterDeployment(bin: string | string[], replicas: number): Promise<Deployment> {
  const topology: RedisClusterTopology = await startCluster({
    primaries: 3,
    replicasPerPrimary: replicas,
    bin,
  });
  const admin = new Cluster(topology.startupNodes);
  admin.on('error', () => undefined);
  return {
    options: { cluster: { nodes: topology.startupNodes } },
    pubSubPorts: topology.servers.map((node) => node.port),
    async keys(base, prefix) {
      const shards = await topology.shards();
      return Promise.all(
        shards.map(async (shard, index) => {
          for (let i = 0; ; i++) {
            const key = `${base}:${index}:${i}`;
            const slot = Number(await admin.cluster('KEYSLOT', redisKeyOf(prefix, key)));
            if (shard.slots.some(([from, to]) => slot >= from && slot <= to)) return key;
          }
        }),
      );
    },
    zcard: (key) => admin.zcard(key),
    async stop() {
      admin.disconnect();
      await topology.stop();
    },
  };
}

describe('a single Redis 6.2.16 node', () => {
  const fixture = on(async () => {
    const server = await startRedis({ bin: REDIS_62 });
    const admin = nodeClient(server.port);
    return {
      options: { redis: server.url },
      pubSubPorts: [server.port],
      keys: async (base) => [base],
      zcard: (key) => admin.zcard(key),
      async stop() {
        admin.disconnect();
        await server.stop();
      },
    };
  });
  locksWakesAndHandsOver(fixture);
});

describe('Redis 6.2.16 with Sentinel (1 primary + 1 replica + 3 sentinels)', () => {
  const fixture = on(async () => {
    const topology = await startSentinelTopology({ bin: REDIS_62 });
    const admin = nodeClient(topology.primary.port);
    return {
      options: { redis: topology.redisOptions() },
      pubSubPorts: [topology.primary.port],
      keys: async (base) => [base],
      zcard: (key) => admin.zcard(key),
      async stop() {
        admin.disconnect();
        await topology.stop();
      },
    };
  });
  locksWakesAndHandsOver(fixture);

  it('counts a grant once the replica acknowledged it (replicaAck, WAIT)', async () => {
    const locks = new LockService({
      ...fixture.deployment.options,
      prefix: fixture.prefix,
      replicaAck: { minReplicas: 1, timeout: 1_000 },
    });
    try {
      const lock = await locks.acquire('acknowledged');
      expect(await lock.release()).toBe(true);
    } finally {
      await locks.close();
    }
  });
});

describe('a Redis 6.2.16 Cluster (3 primaries + 3 replicas): classic pub/sub', () => {
  const fixture = on(() => clusterDeployment(REDIS_62, 1));
  locksWakesAndHandsOver(fixture);

  it('says at startup that it uses classic pub/sub, and why', async () => {
    const before = logged.length;
    const lock = await fixture.service().acquire('startup');
    expect(await lock.release()).toBe(true);
    const said = (): string[] =>
      logged.slice(before).filter((line) => line.includes('sharded pub/sub'));
    await waitFor(() => said().length > 0);
    expect(said()).toEqual([
      expect.stringMatching(/has no sharded pub\/sub \(Redis < 7\).*classic PUBLISH\/SUBSCRIBE/),
    ]);
  });
});

describe('a Cluster in the middle of an upgrade (primaries on 7.0, 7.0 and 6.2)', () => {
  const fixture = on(() => clusterDeployment(['redis-server', 'redis-server', REDIS_62], 0));

  it('uses classic pub/sub everywhere: waiters on 7.0 and on 6.2 shards wake, releases succeed', async () => {
    for (const key of await fixture.keys('mixed')) {
      const { held, next } = await wokenByRelease(fixture, key);
      expect(next.fence).toBe(held.fence + 1);
      expect(await next.release()).toBe(true);
    }
  });
});
