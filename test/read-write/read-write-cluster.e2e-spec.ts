/**
 * Read-write locks on a Redis Cluster (3 primaries, no replicas): each lock's names share its
 * hash slot, so readers, writers and waiting writers work on keys of every shard — sharing,
 * exclusion, writer priority, wake-ups by sharded pub/sub, and renewal of readers mixed with
 * writers in the watchdog's per-shard batches — and every key written has a TTL.
 */
import { Cluster } from 'ioredis';
import type { LockService } from 'nestjs-redis-lock';
import { lockServices } from '../support/lock-services';
import { now, sleep, waitFor } from '../support/time';
import { startCluster, type RedisClusterTopology } from '../support/topologies';
import { uniquePrefix } from '../support/unique-prefix';

const prefix = uniquePrefix('rw-cluster');
const services = lockServices({ prefix });
let topology: RedisClusterTopology;
let admin: Cluster;
let a: LockService;
let b: LockService;

beforeAll(async () => {
  topology = await startCluster({ primaries: 3, replicasPerPrimary: 0 });
  admin = new Cluster(topology.startupNodes);
  admin.on('error', () => undefined);
  a = services.create({ cluster: { nodes: topology.startupNodes }, ttl: 600 });
  b = services.create({ cluster: { nodes: topology.startupNodes }, ttl: 600 });
}, 60_000);

afterAll(async () => {
  await services.closeAll();
  admin?.disconnect();
  await topology?.stop();
});

/** One key on each shard. */
async function keyPerShard(): Promise<string[]> {
  const shards = await topology.shards();
  const keys: string[] = [];
  for (const shard of shards) {
    for (let i = 0; ; i++) {
      const key = `doc:${shard.primary.port}:${i}`;
      const slot = await topology.slotOf(key);
      if (shard.slots.some(([from, to]) => slot >= from && slot <= to)) {
        keys.push(key);
        break;
      }
    }
  }
  return keys;
}

it('shares, excludes and wakes on keys in different slots', async () => {
  const keys = await keyPerShard();
  expect(new Set(await Promise.all(keys.map((k) => topology.slotOf(k)))).size).toBe(3);
  for (const key of keys) {
    const readers = await Promise.all([a, b].map((s) => s.acquire(key, { mode: 'read' })));
    expect(await b.tryAcquire(key)).toBeNull();
    const writer = b.acquire(key, { wait: 10_000 });
    await waitFor(async () => (await admin.exists(`${prefix}{${key}}:writers-waiting`)) === 1);
    expect(await a.tryAcquire(key, { mode: 'read' })).toBeNull();
    const reader = a.acquire(key, { mode: 'read', wait: 10_000 });
    const released = now();
    await Promise.all(readers.map((r) => r.release()));
    const w = await writer;
    expect(now() - released).toBeLessThan(400); // woken by the message, not the 600 ms lease
    await w.release();
    await (await reader).release();
  }
});

it('renews readers and writers together past their ttl, and every key has a TTL', async () => {
  const keys = await keyPerShard();
  const held = await Promise.all(
    keys.flatMap((key, i) => [
      a.acquire(key, { mode: 'read' }),
      b.acquire(key, { mode: 'read' }),
      a.acquire(`w${i}:${key}`),
    ]),
  );
  await sleep(1_500);
  expect(held.every((lock) => lock.isHeld)).toBe(true);
  for (const key of keys) {
    for (const suffix of [':readers', ':fence']) {
      expect(await admin.pttl(`${prefix}{${key}}${suffix}`)).toBeGreaterThan(0);
    }
  }
  await Promise.all(held.map((lock) => lock.release()));
});
