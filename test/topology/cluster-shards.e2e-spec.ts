/**
 * Redis Cluster under shard trouble, on 3 real primaries: one primary stuck (SIGSTOP) while locks
 * on every shard renew, and a live resharding — `CLUSTER SETSLOT … IMPORTING/MIGRATING`, `MIGRATE`,
 * `SETSLOT … NODE` — of the slot of a held lock, with a waiter on it.
 */
import { Logger } from '@nestjs/common';
import { Cluster } from 'ioredis';
import {
  LockLostError,
  RedisUnavailableError,
  type LockHandle,
  type LockService,
} from 'nestjs-redis-lock';
import { clusterSlot } from '../../lib/redis/cluster-slot';
import { lockServices, redisKeyOf } from '../support/lock-services';
import { now, waitFor } from '../support/time';
import {
  nodeClient,
  nodeCommand,
  startCluster,
  type RedisClusterTopology,
  type Shard,
} from '../support/topologies';
import { uniquePrefix } from '../support/unique-prefix';

const prefix = uniquePrefix('shards');
const services = lockServices({ prefix });
let topology: RedisClusterTopology;
let admin: Cluster;

/** Longer than every bound below: a waiter woken only by its fallback timer misses them all. */
const LEASE = 60_000;
const WAKE_BOUND = 10_000;

const owns = (shard: Shard, slot: number): boolean =>
  shard.slots.some(([from, to]) => slot >= from && slot <= to);

const slotOf = (key: string): number => clusterSlot(redisKeyOf(prefix, key));

/** `count` lock keys named after `base` whose slot `shard` serves. */
function keysOn(shard: Shard, base: string, count: number): string[] {
  const found: string[] = [];
  for (let i = 0; found.length < count; i++) {
    if (owns(shard, slotOf(`${base}:${i}`))) found.push(`${base}:${i}`);
  }
  return found;
}

const nodeId = async (shard: Shard): Promise<string> =>
  String(await nodeCommand(shard.primary.port, 'CLUSTER', 'MYID'));

/**
 * Subscribers of `channel` on `shard`'s primary (`SSUBSCRIBE`); before Redis 7, which has no
 * sharded pub/sub, the classic subscribers (`SUBSCRIBE`) on every node, wherever they are.
 */
const subscribers = async (shard: Shard, channel: string): Promise<number> => {
  if (!topology.shardedPubSub) {
    const counts = await Promise.all(
      topology.servers.map(async (node) => {
        const reply = (await nodeCommand(node.port, 'PUBSUB', 'NUMSUB', channel)) as unknown[];
        return Number(reply[1]);
      }),
    );
    return counts.reduce((sum, n) => sum + n, 0);
  }
  const reply = (await nodeCommand(shard.primary.port, 'PUBSUB', 'SHARDNUMSUB', channel)) as [
    string,
    number,
  ];
  return Number(reply[1]);
};

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

/** A live resharding of `slot`, one step at a time, as `redis-cli --cluster reshard` does it. */
async function startMigration(slot: number, from: Shard, to: Shard) {
  const [fromId, toId] = await Promise.all([nodeId(from), nodeId(to)]);
  await nodeCommand(to.primary.port, 'CLUSTER', 'SETSLOT', slot, 'IMPORTING', fromId);
  await nodeCommand(from.primary.port, 'CLUSTER', 'SETSLOT', slot, 'MIGRATING', toId);
  return {
    /** Moves the slot's keys (all of them, or those named) to the importing node. */
    async migrate(keys?: string[]): Promise<void> {
      const moving =
        keys ??
        ((await nodeCommand(
          from.primary.port,
          'CLUSTER',
          'GETKEYSINSLOT',
          slot,
          1000,
        )) as string[]);
      if (moving.length === 0) return;
      await nodeCommand(
        from.primary.port,
        ...['MIGRATE', '127.0.0.1', to.primary.port, '', 0, 5_000, 'KEYS', ...moving],
      );
    },
    /** Gives the slot to the importing node: it first, then the old owner, then the others. */
    async finish(): Promise<void> {
      const shards = await topology.shards();
      const others = shards.filter((shard) => shard !== from && shard !== to);
      for (const shard of [to, from, ...others]) {
        await nodeCommand(shard.primary.port, 'CLUSTER', 'SETSLOT', slot, 'NODE', toId);
      }
      await topology.waitUntilHealthy();
    },
  };
}

beforeAll(async () => {
  // Stuck shards and moving slots make the library log retries and losses on purpose.
  jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  topology = await startCluster({ primaries: 3, replicasPerPrimary: 0 });
  admin = new Cluster(topology.startupNodes);
  admin.on('error', () => undefined);
}, 60_000);

afterAll(async () => {
  await services.closeAll();
  admin?.disconnect();
  await topology?.stop();
  jest.restoreAllMocks();
});

const clusterService = (extra: { commandTimeout?: number } = {}): LockService =>
  services.create({ cluster: { nodes: topology.startupNodes }, ...extra });

describe('Redis Cluster: shard trouble (3 primaries)', () => {
  it('computes the slot of a lock as the servers do', async () => {
    for (const key of ['a', 'order:7', '}x', '{x', 'ü{é}']) {
      const redisKey = redisKeyOf(prefix, key);
      expect(clusterSlot(redisKey)).toBe(Number(await admin.cluster('KEYSLOT', redisKey)));
    }
  });

  it('a stuck shard loses only its own locks: locks on the others keep renewing and their keys stay', async () => {
    const lease = 1_500;
    const locks = clusterService({ commandTimeout: 300 });
    const shards = await topology.shards();
    const held: LockHandle[][] = await Promise.all(
      shards.map((shard, i) =>
        Promise.all(
          keysOn(shard, `stuck:${i}`, 3).map((key) => locks.acquire(key, { ttl: lease })),
        ),
      ),
    );
    const [stuck, ...healthy] = held;
    const lostAt = new Map<LockHandle, number>();
    for (const lock of stuck!) {
      lock.signal.addEventListener('abort', () => lostAt.set(lock, now()), { once: true });
    }
    const paused = shards[0]!.primary;
    paused.pause();
    try {
      // The stuck shard's locks are lost at their deadline, not before…
      await waitFor(() => stuck!.every((lock) => !lock.isHeld), 3 * lease, 20);
      for (const lock of stuck!) {
        expect((lock.signal.reason as LockLostError).reason).toBe('deadline');
        expect(lostAt.get(lock)).toBeGreaterThanOrEqual(lock.validUntil);
      }
      // …while every lock on the other shards renewed through the whole outage (two leases).
      const until = now() + lease;
      await waitFor(() => now() >= until || healthy.flat().some((lock) => !lock.isHeld), 2 * lease);
      for (const [i, locksOnShard] of healthy.entries()) {
        const primary = nodeClient(shards[i + 1]!.primary.port);
        try {
          for (const lock of locksOnShard) {
            expect(lock.isHeld).toBe(true);
            expect(await primary.get(redisKeyOf(prefix, lock.key))).toBe(lock.token);
          }
        } finally {
          primary.disconnect();
        }
      }
    } finally {
      paused.resume();
    }
    for (const lock of healthy.flat()) expect(await lock.release()).toBe(true);
    await topology.waitUntilHealthy();
  });

  it('releases a held lock while its slot is MIGRATING; a free lock is taken within the wait budget once the move completes', async () => {
    const shards = await topology.shards();
    const [from, to] = [shards[1], shards[2]];
    const [key] = keysOn(from!, 'migrating', 1);
    const holder = clusterService();
    const waiter = clusterService();
    const held = await holder.acquire(key!, { ttl: LEASE });
    const waiting = waiter.acquire(key!, { wait: 30_000 });
    waiting.catch(() => undefined); // awaited below
    const channel = `${redisKeyOf(prefix, key!)}:released`;
    await waitFor(async () => (await subscribers(from!, channel)) === 1);

    const migration = await startMigration(slotOf(key!), from!, to!);
    // The lease is still on the old owner, the release message's channel nowhere as a key.
    expect(await held.release()).toBe(true);
    const left = await nodeCommand(
      from!.primary.port,
      'CLUSTER',
      'GETKEYSINSLOT',
      slotOf(key!),
      10,
    );
    expect(left).toEqual([`${redisKeyOf(prefix, key!)}:fence`]);
    // A free lock in a slot half moved (its fence counter here, its lease nowhere): every try
    // meets TRYAGAIN, and a caller without a wait budget hears "unavailable", never "busy".
    await expect(clusterService().tryAcquire(key!)).rejects.toBeInstanceOf(RedisUnavailableError);
    // The waiter, woken by the release, met the same for longer than one try lasts: it kept
    // retrying within its budget, and gets the lock once the slot has moved.
    await migration.migrate();
    await migration.finish();
    const next = await within(waiting, WAKE_BOUND, 'waiter after the move');
    expect(next.fence).toBe(held.fence + 1);
    expect(await nodeCommand(to!.primary.port, 'GET', redisKeyOf(prefix, key!))).toBe(next.token);
    expect(await next.release()).toBe(true);
  });

  it('fair mode: retries a release that meets TRYAGAIN in a half-moved slot until the move completes', async () => {
    const shards = await topology.shards();
    const [from, to] = [shards[2], shards[1]];
    const [key] = keysOn(from!, 'fair-migrating', 1);
    const fair = (): LockService =>
      services.create({ cluster: { nodes: topology.startupNodes }, fair: true });
    const held = await fair().acquire(key!, { ttl: LEASE });

    const migration = await startMigration(slotOf(key!), from!, to!);
    // Only the lease moves: the fair release script (lease, fence counter, queue) meets a slot
    // that has some of its keys and not others, which Redis answers with TRYAGAIN, unrun.
    await migration.migrate([redisKeyOf(prefix, key!)]);
    const releasing = held.release();
    releasing.catch(() => undefined); // awaited below
    // Sent after the release, this try meets the same refusals for as long as one try lasts.
    await expect(fair().tryAcquire(key!)).rejects.toBeInstanceOf(RedisUnavailableError);
    await migration.migrate();
    await migration.finish();
    expect(await releasing).toBe(true);
    expect(await fair().withLock(key!, async (next) => next.fence)).toBe(held.fence + 1);
  });

  it('follows a slot that moved: the waiter subscribes on the new owner and is woken by the release message', async () => {
    const shards = await topology.shards();
    const [from, to] = [shards[0], shards[2]];
    const [key, other] = keysOn(from!, 'moved', 2);
    const holder = clusterService();
    const waiter = clusterService();
    const held = await holder.acquire(key!, { ttl: LEASE });
    // A second waited-on lock in another slot of the same node: its subscription must stay.
    const heldOther = await holder.acquire(other!, { ttl: LEASE });
    const waiting = waiter.acquire(key!, { wait: LEASE });
    waiting.catch(() => undefined); // awaited below
    const waitingOther = waiter.acquire(other!, { wait: LEASE });
    waitingOther.catch(() => undefined);
    const channel = `${redisKeyOf(prefix, key!)}:released`;
    await waitFor(async () => (await subscribers(from!, channel)) === 1);

    const migration = await startMigration(slotOf(key!), from!, to!);
    await migration.migrate();
    await migration.finish();
    // The old owner dropped the channel when it gave the slot away; the new one has it. (A
    // classic subscription, before Redis 7, sits on any one node and does not move.)
    await waitFor(async () => (await subscribers(to!, channel)) === 1, WAKE_BOUND);
    if (topology.shardedPubSub) expect(await subscribers(from!, channel)).toBe(0);

    const released = now();
    expect(await held.release()).toBe(true);
    const next = await within(waiting, WAKE_BOUND, 'waiter on the moved slot');
    expect(now() - released).toBeLessThan(WAKE_BOUND);
    expect(next.fence).toBe(held.fence + 1);
    expect(await next.release()).toBe(true);
    // The lock that stayed put still wakes its waiter too.
    expect(await heldOther.release()).toBe(true);
    expect(
      await (await within(waitingOther, WAKE_BOUND, 'waiter on the other slot')).release(),
    ).toBe(true);
  });
});
