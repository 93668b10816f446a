/**
 * Read-write locks on a Redis Cluster (3 primaries, no replicas): each lock's names share its
 * hash slot, so readers, writers and waiting writers work on keys of every shard — sharing,
 * exclusion, writer priority, wake-ups by sharded pub/sub, and renewal of readers mixed with
 * writers in the watchdog's per-shard batches — and every key written has a TTL.
 */
import type { LockService } from 'nestjs-redis-lock';
import { onOwnCluster } from '../support/own-cluster';
import { now, sleep, waitFor } from '../support/time';

const cluster = onOwnCluster('rw-cluster');
const { prefix } = cluster;
let a: LockService;
let b: LockService;

beforeAll(() => {
  a = cluster.service({ ttl: 600 });
  b = cluster.service({ ttl: 600 });
});

/** One key on each shard. */
const keyPerShard = (): Promise<string[]> => cluster.keyPerShard('doc');

it('shares, excludes and wakes on keys in different slots', async () => {
  const keys = await keyPerShard();
  expect(new Set(await Promise.all(keys.map((k) => cluster.topology.slotOf(k)))).size).toBe(3);
  for (const key of keys) {
    const readers = await Promise.all([a, b].map((s) => s.acquire(key, { mode: 'read' })));
    expect(await b.tryAcquire(key)).toBeNull();
    const writer = b.acquire(key, { wait: 10_000 });
    await waitFor(
      async () => (await cluster.admin.exists(`${prefix}{${key}}:writers-waiting`)) === 1,
    );
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
      expect(await cluster.admin.pttl(`${prefix}{${key}}${suffix}`)).toBeGreaterThan(0);
    }
  }
  await Promise.all(held.map((lock) => lock.release()));
});
