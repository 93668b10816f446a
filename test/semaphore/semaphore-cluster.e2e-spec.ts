/**
 * Semaphores on a Redis Cluster (3 primaries): keys in different slots, each served by its own
 * shard, hold N permits at most; a release wakes a waiter through the shard's pub/sub; in fair
 * mode each shard serves its key's waiters in arrival order; every key written has a TTL on the
 * node that holds it.
 */
import type { LockHandle, LockService } from 'nestjs-redis-lock';
import { onOwnCluster } from '../support/own-cluster';
import { now, sleep, waitFor } from '../support/time';
import { nodeClient } from '../support/topologies';

const PERMITS = 2;
const cluster = onOwnCluster('sem-cluster');
const { prefix } = cluster;

const clusterService = (): LockService => cluster.service({ ttl: 10_000 });
const keyPerShard = (): Promise<string[]> => cluster.keyPerShard('export');

/** LOOPS loops per key, over two services, each running short sections; max at once per key. */
async function highest(keys: string[], locked: boolean): Promise<Map<string, number>> {
  const [a, b] = [clusterService(), clusterService()];
  const active = new Map<string, number>();
  const max = new Map<string, number>();
  const section = async (key: string): Promise<void> => {
    const n = (active.get(key) ?? 0) + 1;
    active.set(key, n);
    max.set(key, Math.max(max.get(key) ?? 0, n));
    await sleep(3);
    active.set(key, active.get(key)! - 1);
  };
  await Promise.all(
    keys.flatMap((key) =>
      [a, b, a, b, a, b].map(async (locks) => {
        for (let i = 0; i < 15; i++) {
          if (locked)
            await locks.withLock(key, () => section(key), { permits: PERMITS, wait: 20_000 });
          else await section(key);
        }
      }),
    ),
  );
  return max;
}

describe(`a semaphore of ${PERMITS} permits on a Cluster`, () => {
  it('bounds each key in its own slot to N holders, all keys at once (control: exceeds N)', async () => {
    const keys = await keyPerShard();
    expect(new Set(await Promise.all(keys.map((k) => cluster.topology.slotOf(k)))).size).toBe(3);
    const bounded = await highest(keys, true);
    const control = await highest(keys, false);
    for (const key of keys) {
      expect(bounded.get(key)).toBe(PERMITS);
      expect(control.get(key)).toBeGreaterThan(PERMITS);
    }
  });

  it('wakes a waiter by the release message (holders with 10 s leases), on every shard', async () => {
    const [holder, waiting] = [clusterService(), clusterService()];
    for (const key of await keyPerShard()) {
      const held = await Promise.all([1, 2].map(() => holder.acquire(key, { permits: PERMITS })));
      const waiter = waiting.acquire(key, { permits: PERMITS, wait: 8_000 });
      await sleep(300);
      const releasedAt = now();
      await held[0]!.release();
      const woken = await waiter;
      expect(now() - releasedAt).toBeLessThan(3_000);
      await Promise.all([woken.release(), held[1]!.release()]);
    }
  });

  it('gives every key it writes a TTL on the node that holds it', async () => {
    const locks = clusterService();
    const keys = await keyPerShard();
    const held = await Promise.all(keys.map((key) => locks.acquire(key, { permits: PERMITS })));
    const seen: Record<string, number> = {};
    for (const server of cluster.topology.servers) {
      const node = nodeClient(server.port);
      const names = await node.keys(`${prefix}*`);
      for (const name of names) seen[name] = await node.pttl(name);
      node.disconnect();
    }
    await Promise.all(held.map((lock) => lock.release()));
    // permits, limit, fence, holder records per key
    expect(Object.keys(seen)).toHaveLength(keys.length * 4);
    for (const pttl of Object.values(seen)) expect(pttl).toBeGreaterThan(0);
  });
});

describe(`a fair semaphore of ${PERMITS} permits on a Cluster`, () => {
  it('serves each shard’s waiters in arrival order, its queue keys in the key’s slot with a TTL', async () => {
    const fairService = (): LockService => cluster.service({ ttl: 10_000, fair: true });
    const holder = fairService();
    for (const key of await keyPerShard()) {
      const permits = `${prefix}{${key}}:permits`; // the semaphore's companions
      const held = await Promise.all([1, 2].map(() => holder.acquire(key, { permits: PERMITS })));
      const order: number[] = [];
      const waiters: Promise<LockHandle>[] = [];
      for (let i = 0; i < 3; i++) {
        const acquired = fairService().acquire(key, { permits: PERMITS, wait: 10_000 });
        waiters.push(acquired.then((lock) => (order.push(i), lock)));
        await waitFor(async () => (await cluster.admin.zcard(`${permits}:queue`)) === i + 1);
      }
      // The queue and its entries live on the key's own node (one slot), each with a TTL.
      for (const name of [`${permits}:queue`, `${permits}:waiters`]) {
        expect(await cluster.admin.pttl(name)).toBeGreaterThan(0);
      }
      // One freed permit at a time, each to the first in line.
      const frees = [() => held[0]!.release(), () => held[1]!.release()];
      frees.push(async () => (await waiters[0]!).release());
      for (const [i, free] of frees.entries()) {
        await free();
        await waiters[i];
        expect(order).toEqual(Array.from({ length: i + 1 }, (_, n) => n));
      }
      await Promise.all(waiters.slice(1).map(async (lock) => (await lock).release()));
      expect(await cluster.admin.exists(`${prefix}{${key}}`, `${permits}:queue`)).toBe(0);
    }
  });
});
