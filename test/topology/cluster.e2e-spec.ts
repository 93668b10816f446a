/**
 * Redis Cluster: 3 primaries + 3 replicas from real `redis-server --cluster-enabled`
 * processes. Exclusion across processes, sharded pub/sub hand-off on each shard, keys over many
 * slots, the decorator on a cluster-backed app, a manual failover during a run, and a primary
 * killed before its replica got a grant (the loss must be reported, never silent).
 */
import { Controller, Injectable, Logger, Param, Post, type INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Cluster } from 'ioredis';
import request from 'supertest';
import {
  currentLock,
  LockLostError,
  LockNotAcquiredError,
  Locked,
  LockService,
  RedisLockModule,
  RedisUnavailableError,
  type LockHandle,
} from 'nestjs-redis-lock';
import { lockServices, redisKeyOf } from '../support/lock-services';
import { killAllWorkers } from '../support/processes';
import { deleteKeys, redisClient } from '../support/shared-redis';
import { now, sleep, waitFor } from '../support/time';
import {
  nodeClient,
  nodeCommand,
  startCluster,
  waitForReplication,
  type RedisClusterTopology,
  type Shard,
} from '../support/topologies';
import { uniquePrefix } from '../support/unique-prefix';
import { startRacers } from './exclusion-race';

const prefix = uniquePrefix('cluster');
let topology: RedisClusterTopology;
let admin: Cluster;
const services = lockServices({ prefix });
const shared = redisClient();

/** A LockService on the cluster: what one app instance would own. */
const clusterService = (): LockService =>
  services.create({ cluster: { nodes: topology.startupNodes } });

const owns = (shard: Shard, slot: number): boolean =>
  shard.slots.some(([from, to]) => slot >= from && slot <= to);

/** `count` lock keys (starting with `base`) whose slot is served by `shards[index]` right now. */
async function keysOnShard(index: number, base: string, count = 1): Promise<string[]> {
  const shard = (await topology.shards())[index];
  const found: string[] = [];
  for (let i = 0; found.length < count; i++) {
    const key = `${base}:${i}`;
    if (owns(shard!, Number(await admin.cluster('KEYSLOT', key)))) found.push(key);
  }
  return found;
}

/** Acquires `key` with `waiter` while `holder` holds it; resolves ms from release to grant. */
async function handOffGap(holder: LockService, waiter: LockService, key: string): Promise<number> {
  const held = await holder.acquire(key, { ttl: 20_000 });
  const waiting = waiter.acquire(key, { wait: 15_000 });
  // Release once the waiter is subscribed where the message will reach it: on a node of the shard
  // that owns the key's slot now (sharded; a primary's SPUBLISH reaches its replicas' subscribers
  // too), or anywhere (classic). After a failover the subscriber may first have to follow the
  // slot; a fixed sleep raced that on a loaded machine.
  const channel = `${redisKeyOf(prefix, key)}:released`;
  await waitFor(async () => {
    const sharded = topology.shardedPubSub;
    const owner = sharded ? await topology.shardOf(key) : undefined;
    const nodes = owner ? [owner.primary, ...owner.replicas] : topology.servers;
    const counts = await Promise.all(
      nodes.map(async (node) => {
        const kind = sharded ? 'SHARDNUMSUB' : 'NUMSUB';
        const reply = (await nodeCommand(node.port, 'PUBSUB', kind, channel)) as unknown[];
        return Number(reply[1]);
      }),
    );
    return counts.some((count) => count > 0);
  }, 10_000);
  const released = now();
  expect(await held.release()).toBe(true);
  const next = await waiting;
  const gap = now() - released;
  await next.release();
  return gap;
}

beforeAll(async () => {
  // Failovers make the library log retries and losses on purpose; keep the output readable.
  jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  topology = await startCluster({ primaries: 3, replicasPerPrimary: 1 });
  admin = new Cluster(topology.startupNodes);
  admin.on('error', () => undefined);
}, 60_000);

afterAll(async () => {
  await services.closeAll();
  await killAllWorkers();
  admin?.disconnect();
  await topology?.stop();
  await deleteKeys(shared, prefix);
  await shared.quit();
  jest.restoreAllMocks();
});

describe('Redis Cluster: 3 primaries + 3 replicas', () => {
  it('spreads locks over many slots on every shard, each lock with its fence in one slot', async () => {
    const locks = clusterService();
    const keys = Array.from({ length: 300 }, (_, i) => `spread:${i}`);
    const handles = await Promise.all(keys.map((key) => locks.acquire(key)));

    const slots = await Promise.all(
      keys.map(async (key) => Number(await admin.cluster('KEYSLOT', redisKeyOf(prefix, key)))),
    );
    expect(new Set(slots).size).toBeGreaterThan(250);
    const shards = await topology.shards();
    expect(shards).toHaveLength(3);

    // Each lease (and its fence counter) lives on the primary that serves its slot.
    const primaries = shards.map((shard) => nodeClient(shard.primary.port));
    try {
      const perShard = [0, 0, 0];
      await Promise.all(
        keys.map(async (key, i) => {
          const index = shards.findIndex((shard) => owns(shard, slots[i]!));
          perShard[index]!++;
          const lease = redisKeyOf(prefix, key);
          expect(await primaries[index]!.get(lease)).toBe(handles[i]!.token);
          expect(await primaries[index]!.get(`${lease}:fence`)).toBe(String(handles[i]!.fence));
          expect(Number(await admin.cluster('KEYSLOT', `${lease}:fence`))).toBe(slots[i]);
          expect(Number(await admin.cluster('KEYSLOT', `${lease}:released`))).toBe(slots[i]);
        }),
      );
      for (const count of perShard) expect(count).toBeGreaterThan(50);
    } finally {
      primaries.forEach((client) => client.disconnect());
    }

    expect(await Promise.all(handles.map((lock) => lock.release()))).toEqual(keys.map(() => true));
    expect(await Promise.all(keys.map((key) => locks.isLocked(key)))).toEqual(
      keys.map(() => false),
    );
  });

  it('wakes a waiter through sharded pub/sub on the lock’s own shard (classic before Redis 7), long before the lease ends', async () => {
    const holder = clusterService();
    const waiter = clusterService();
    for (let index = 0; index < 3; index++) {
      const [key] = await keysOnShard(index, `hand-off:${index}`);
      const shard = (await topology.shards())[index];
      const channel = `${redisKeyOf(prefix, key!)}:released`;

      const held = await holder.acquire(key!, { ttl: 20_000 });
      const waiting = waiter.acquire(key!, { wait: 15_000 });
      const classic = async (): Promise<number[]> =>
        Promise.all(
          topology.servers.map(async (node) => {
            const reply = (await nodeCommand(node.port, 'PUBSUB', 'NUMSUB', channel)) as unknown[];
            return Number(reply[1]);
          }),
        );
      if (topology.shardedPubSub) {
        // The waiter subscribed with SSUBSCRIBE on the primary of the lock's slot…
        await waitFor(async () => {
          const reply = (await nodeCommand(
            shard!.primary.port,
            'PUBSUB',
            'SHARDNUMSUB',
            channel,
          )) as [string, number] | undefined;
          return Number(reply?.[1]) === 1;
        });
        // …and not with a classic SUBSCRIBE broadcast over the whole cluster.
        expect(await classic()).toEqual(topology.servers.map(() => 0));
      } else {
        // Redis < 7 has no sharded pub/sub: one classic SUBSCRIBE, on any node.
        await waitFor(async () => (await classic()).reduce((sum, n) => sum + n, 0) === 1);
      }

      const released = now();
      expect(await held.release()).toBe(true);
      const next = await waiting;
      const gap = now() - released;
      // Without the message the waiter would sleep until the holder's lease end (~20 s).
      expect(gap).toBeLessThan(1_000);
      expect(next.fence).toBe(held.fence + 1);
      await next.release();
    }
  });

  it('fair mode: hands the lock over in arrival order by grant message, on every shard', async () => {
    const fair = (): LockService =>
      services.create({ cluster: { nodes: topology.startupNodes }, fair: true });
    for (let index = 0; index < 3; index++) {
      const [key] = await keysOnShard(index, `fair:${index}`);
      const queue = `${redisKeyOf(prefix, key!)}:queue`;
      const holder = await fair().acquire(key!, { ttl: 20_000 });
      const order: number[] = [];
      const done: Promise<void>[] = [];
      for (let i = 0; i < 3; i++) {
        const waiting = fair().acquire(key!, { wait: 15_000 });
        // Queued in the lock's own slot (no CROSSSLOT), one after the other.
        await waitFor(async () => (await admin.zcard(queue)) === i + 1);
        done.push(
          waiting.then(async (lock) => {
            order.push(i);
            await lock.release();
          }),
        );
      }
      const released = now();
      expect(await holder.release()).toBe(true);
      await Promise.all(done);
      // Three hand-offs by grant message; without them each would wait out a 20 s lease.
      expect(now() - released).toBeLessThan(5_000);
      expect(order).toEqual([0, 1, 2]);
    }
  });

  it('renews each lock on its own: a foreign value under one key loses that lock, not the batch', async () => {
    const locks = clusterService();
    const held = await Promise.all(
      [0, 1, 2, 3].map((i) => locks.acquire(`batch:${i}`, { ttl: 900 })),
    );
    // Another application overwrote one lock's key with a hash: its renewal meets WRONGTYPE.
    const foreign = redisKeyOf(prefix, 'batch:3');
    await admin.del(foreign);
    await admin.hset(foreign, 'field', 'value');
    await sleep(1_500); // several renewal periods, past the 900 ms lease
    expect(held[3]!.isHeld).toBe(false);
    for (const lock of held.slice(0, 3)) {
      expect(lock.isHeld).toBe(true);
      expect(await admin.get(redisKeyOf(prefix, lock.key))).toBe(lock.token);
      expect(await lock.release()).toBe(true);
    }
    await admin.del(foreign);
  });

  it('accepts your own ioredis Cluster as `redis` (wake-ups both ways) and leaves it open', async () => {
    const own = new Cluster(topology.startupNodes);
    own.on('error', () => undefined);
    try {
      const mine = new LockService({ redis: own, prefix });
      const theirs = clusterService();
      const [key] = await keysOnShard(2, 'own-client');
      expect(await handOffGap(theirs, mine, key!)).toBeLessThan(1_000);
      expect(await handOffGap(mine, theirs, key!)).toBeLessThan(1_000);
      await mine.close();
      expect(own.status).toBe('ready');
      expect(await own.ping()).toBe('PONG');
    } finally {
      own.disconnect();
    }
  });

  it('falls back to classic pub/sub, with a warning, when the Redis user may not run COMMAND', async () => {
    // A user allowed everything but COMMAND, so it cannot ask whether the nodes have SPUBLISH.
    await Promise.all(
      topology.servers.map((node) =>
        nodeCommand(node.port, 'ACL', 'SETUSER', 'no-command', 'on', '>pw', '~*', '&*', '+@all'),
      ),
    );
    await Promise.all(
      topology.servers.map((node) =>
        nodeCommand(node.port, 'ACL', 'SETUSER', 'no-command', '-command'),
      ),
    );
    const restricted = (): LockService =>
      services.create({
        cluster: {
          nodes: topology.startupNodes,
          options: { redisOptions: { username: 'no-command', password: 'pw' } },
        },
      });
    const warn = jest.mocked(Logger.prototype.warn);
    const warnedBefore = warn.mock.calls.length;
    const [key] = await keysOnShard(1, 'no-command');
    const channel = `${redisKeyOf(prefix, key!)}:released`;
    const holder = restricted();
    const held = await holder.acquire(key!, { ttl: 20_000 });
    const waiting = restricted().acquire(key!, { wait: 15_000 });
    // One classic SUBSCRIBE somewhere in the Cluster, whatever the nodes could have done.
    await waitFor(async () => {
      const counts = await Promise.all(
        topology.servers.map(async (node) => {
          const reply = (await nodeCommand(node.port, 'PUBSUB', 'NUMSUB', channel)) as unknown[];
          return Number(reply[1]);
        }),
      );
      return counts.reduce((sum, n) => sum + n, 0) === 1;
    });
    const released = now();
    expect(await held.release()).toBe(true);
    const next = await waiting;
    expect(now() - released).toBeLessThan(1_000); // woken by the message, not the 20 s lease
    await next.release();
    expect(warn.mock.calls.slice(warnedBefore).map(([message]) => String(message))).toContainEqual(
      expect.stringMatching(/refused COMMAND INFO \(NOPERM\).*classic PUBLISH\/SUBSCRIBE/),
    );
  });

  it('falls back to classic pub/sub, with a warning, when a node does not answer the startup check; releases still succeed', async () => {
    const warn = jest.mocked(Logger.prototype.warn);
    const warnedBefore = warn.mock.calls.length;
    const [key] = await keysOnShard(0, 'silent-node');
    // A paused replica: it might be an older server, and a failover could make it the primary.
    const replica = (await topology.shards())[2]!.replicas[0];
    // Clients learn of a replica (CLUSTER SLOTS) once it holds data: give its shard a write.
    const [data] = await keysOnShard(2, 'silent-node-data');
    await admin.set(data!, '1', 'PX', 60_000);
    await waitFor(async () => {
      const views = await Promise.all(
        topology.servers.map((node) => nodeCommand(node.port, 'CLUSTER', 'SLOTS')),
      );
      return views.every((view) => JSON.stringify(view).includes(`,${replica!.port},`));
    });
    replica!.pause();
    try {
      // A release does not wait for the startup check (it publishes classic until that answers).
      // Not a startup node: the client learns of it from CLUSTER SLOTS, as of any replica.
      const nodes = topology.startupNodes.filter((node) => node.port !== replica!.port);
      const locks = services.create({ cluster: { nodes }, commandTimeout: 1_000 });
      const lock = await locks.acquire(key!);
      expect(await lock.release()).toBe(true);
      expect(await locks.withLock(key!, async (held) => held.fence)).toBe(lock.fence + 1);
      // The check gives up on the paused node after commandTimeout, and says so — where the
      // others have sharded pub/sub (before Redis 7 they decide it, and that is only logged).
      const silent = new RegExp(`${replica!.port} did not answer COMMAND INFO.*classic PUBLISH`);
      if (topology.shardedPubSub) {
        await waitFor(() =>
          warn.mock.calls.slice(warnedBefore).some(([message]) => silent.test(String(message))),
        );
      }
    } finally {
      replica!.resume();
    }
    await topology.waitUntilHealthy();
  });

  it('lets no two processes overlap on a shared counter (and the unlocked control loses updates)', async () => {
    const racers = await startRacers(3, 100, prefix, { cluster: { nodes: topology.startupNodes } });
    try {
      expect(await racers.race('locked', true)).toBe(racers.expected);
      expect(await racers.race('unlocked', false)).toBeLessThan(racers.expected);
    } finally {
      await racers.close();
    }
  });

  describe('@Locked on a cluster-backed Nest app', () => {
    @Injectable()
    class ReportService {
      running = new Map<string, number>();
      maxPerKey = 0;
      maxOverall = 0;
      fences = new Map<string, number[]>();

      @Locked('report:<tenantId>', { wait: 10_000 })
      async build(tenantId: string): Promise<number> {
        const lock = currentLock()!;
        this.running.set(tenantId, (this.running.get(tenantId) ?? 0) + 1);
        this.maxPerKey = Math.max(this.maxPerKey, this.running.get(tenantId)!);
        const overall = [...this.running.values()].reduce((sum, n) => sum + n, 0);
        this.maxOverall = Math.max(this.maxOverall, overall);
        await sleep(15);
        this.running.set(tenantId, this.running.get(tenantId)! - 1);
        this.fences.set(tenantId, [...(this.fences.get(tenantId) ?? []), lock.fence]);
        return lock.fence;
      }
    }

    @Controller('reports')
    class ReportController {
      @Post(':tenantId')
      @Locked('report:<tenantId>')
      async create(
        @Param('tenantId') tenantId: string,
      ): Promise<{ tenantId: string; fence: number }> {
        return { tenantId, fence: currentLock()!.fence };
      }
    }

    let app: INestApplication;

    beforeAll(async () => {
      const moduleRef = await Test.createTestingModule({
        imports: [RedisLockModule.forRoot({ cluster: { nodes: topology.startupNodes }, prefix })],
        controllers: [ReportController],
        providers: [ReportService],
      }).compile();
      app = moduleRef.createNestApplication({ logger: false });
      await app.init();
    });

    afterAll(() => app?.close());

    it('serializes calls on one key and runs keys on different shards in parallel', async () => {
      const service = app.get(ReportService);
      const tenants = await Promise.all([0, 1, 2].map(async (i) => (await keysOnShard(i, 't'))[0]));
      const calls = tenants.flatMap((tenant) => [1, 2, 3, 4].map(() => service.build(tenant!)));
      await Promise.all(calls);

      expect(service.maxPerKey).toBe(1);
      expect(service.maxOverall).toBeGreaterThan(1);
      for (const tenant of tenants) {
        const fences = service.fences.get(tenant!)!;
        expect(fences).toHaveLength(4);
        expect([...fences].sort((a, b) => a - b)).toEqual(fences);
        expect(new Set(fences).size).toBe(4);
      }
    });

    it('answers 409 on a route while another instance holds the key, 201 once released', async () => {
      const otherInstance = clusterService();
      const held = await otherInstance.acquire('report:busy-tenant');
      await request(app.getHttpServer())
        .post('/reports/busy-tenant')
        .expect(409)
        .expect('Retry-After', /^\d+$/);
      await held.release();
      const created = await request(app.getHttpServer()).post('/reports/busy-tenant').expect(201);
      expect(created.body).toEqual({ tenantId: 'busy-tenant', fence: held.fence + 1 });
    });
  });

  it('keeps exclusion and lets every client lock again after CLUSTER FAILOVER during a run', async () => {
    const clients = [clusterService(), clusterService(), clusterService()];
    const shardKeys = await Promise.all([0, 1, 2].map((i) => keysOnShard(i, `run:${i}`, 3)));
    const keys = shardKeys.flat();
    const inside = new Map<string, number>();
    const errors: string[] = [];
    let overlaps = 0;
    let runs = 0;
    let stop = false;

    const loop = async (client: LockService): Promise<void> => {
      while (!stop) {
        const key = keys[Math.floor(Math.random() * keys.length)];
        try {
          await client.withLock(
            key!,
            async () => {
              inside.set(key!, (inside.get(key!) ?? 0) + 1);
              if (inside.get(key!)! > 1) overlaps++;
              await sleep(2);
              inside.set(key!, inside.get(key!)! - 1);
            },
            { wait: 3_000, ttl: 3_000 },
          );
          runs++;
        } catch (error) {
          // Busy or unreachable while the slot moves is fine; anything else is a bug.
          if (error instanceof LockNotAcquiredError || error instanceof RedisUnavailableError) {
            await sleep(10);
          } else {
            errors.push(String(error));
          }
        }
      }
    };
    const loops = clients.map((client) => loop(client));

    await waitFor(() => runs > 50, 10_000);
    const shard = (await topology.shards())[0];
    const [replica] = shard!.replicas;
    await waitForReplication(shard!.primary.port, replica!.port);
    await nodeCommand(replica!.port, 'CLUSTER', 'FAILOVER');
    await topology.waitForPromotion(replica!);
    const runsAtPromotion = runs;
    await waitFor(() => runs > runsAtPromotion + 100, 15_000);
    stop = true;
    await Promise.all(loops);

    expect(errors).toEqual([]);
    expect(overlaps).toBe(0);
    // Every client can take every key again, including those of the failed-over shard.
    for (const client of clients) {
      for (const key of keys) {
        const lock = await client.tryAcquire(key);
        expect(lock).not.toBeNull();
        expect(await lock!.release()).toBe(true);
      }
    }
    // And release messages still reach waiters on the shard that moved.
    expect(await handOffGap(clients[0]!, clients[1]!, shardKeys[0]![0]!)).toBeLessThan(1_000);
  });

  it('reports a lock lost when its primary dies before the replica got it; all clients lock again', async () => {
    const shards = await topology.shards();
    const shard = shards[1]!;
    const { primary } = shard;
    const [replica] = shard.replicas;
    const [keptKey, lostKey] = await keysOnShard(1, 'kill', 2);
    const holder = clusterService();
    const waiter = clusterService();
    const bystander = clusterService();
    const lostEvents: string[] = [];
    holder.on('lost', (_error, lock) => lostEvents.push(lock.key));

    // `kept` reaches the replica before the crash; `lost` is granted while the replica is cut off.
    const kept = await holder.acquire(keptKey!, { ttl: 8_000 });
    await waitForReplication(primary.port, replica!.port);
    replica!.pause();
    await nodeCommand(primary.port, 'CLIENT', 'KILL', 'TYPE', 'replica');
    const lost = await holder.acquire(lostKey!, { ttl: 4_000 });
    expect(await nodeCommand(primary.port, 'GET', redisKeyOf(prefix, lostKey!))).toBe(lost.token);

    const keptWaiter = waiter.acquire(keptKey!, { wait: 30_000 });
    const lostWaiter = waiter.acquire(lostKey!, { wait: 30_000 });
    await sleep(100);

    const crashed = now();
    await primary.kill();
    replica!.resume();
    await topology.waitForPromotion(replica!);
    const promoted = now();

    // The lost grant is reported through the signal and the event; release says so too.
    await waitFor(() => lost.signal.aborted, 15_000);
    expect(lost.signal.reason).toBeInstanceOf(LockLostError);
    expect(lostEvents).toEqual([lostKey]);
    expect(await lost.release()).toBe(false);
    // Its waiter gets the key (the promoted replica never had it) within the lease.
    const successor: LockHandle = await lostWaiter;
    expect(now() - crashed).toBeLessThan(15_000);
    // The fence counter was lost with the grant; a new counter starts from Redis' clock in µs,
    // above every fence handed out before.
    expect(successor.fence).toBeGreaterThan(lost.fence);
    await successor.release();

    // The replicated lock survived: still ours, renewable, and its waiter is woken on release.
    expect(kept.signal.aborted).toBe(false);
    await kept.extend(8_000);
    const released = now();
    expect(await kept.release()).toBe(true);
    const next = await keptWaiter;
    expect(now() - released).toBeLessThan(1_000);
    await next.release();

    // Every client, old and new, can lock keys on every shard (no "only the old holder" bug).
    const fresh = clusterService();
    for (const client of [holder, waiter, bystander, fresh]) {
      for (let index = 0; index < 3; index++) {
        const [key] = await keysOnShard(index, `after-kill:${index}`);
        const lock = await client.tryAcquire(key!);
        expect(lock).not.toBeNull();
        expect(await lock!.release()).toBe(true);
      }
    }
    expect(now() - promoted).toBeLessThan(20_000);
  });
});
