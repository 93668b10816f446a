/**
 * Read-write locks on a Redis Cluster (3 primaries, no replicas): each lock's names share its
 * hash slot, so readers, writers and waiting writers work on keys of every shard — sharing,
 * exclusion, writer priority, wake-ups by sharded pub/sub, and renewal of readers mixed with
 * writers in the watchdog's per-shard batches — and every key written has a TTL.
 */
import type { LockService } from 'nestjs-redis-lock';
import {
  acquireKind,
  KINDS,
  outcomeOf,
  renewedNamesOf,
  writeForeignValue,
} from '../support/foreign-values';
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
    for (const suffix of ['', ':fence']) {
      expect(await cluster.admin.pttl(`${prefix}{${key}}${suffix}`)).toBeGreaterThan(0);
    }
  }
  await Promise.all(held.map((lock) => lock.release()));
});

it.each(KINDS)(
  'keeps each lock its own outcome when a foreign value sits under a %s lock, on a Cluster',
  async (victimKind) => {
    const keys = await keyPerShard();
    const names = renewedNamesOf(prefix, keys[0]!, victimKind).map((_, i) => i);
    // Per key, one victim per name the kind renews under, beside a lock of every kind.
    const sets = await Promise.all(
      keys.flatMap((key) =>
        names.map(async (i) => {
          const base = `foreign-${victimKind}:${key}:${i}`;
          const [victim, ...others] = await Promise.all([
            acquireKind(a, base, victimKind),
            ...KINDS.map((kind) => acquireKind(a, `${base}:beside-${kind}`, kind)),
          ]);
          return {
            victim,
            others,
            main: i === 0,
            name: renewedNamesOf(prefix, base, victimKind)[i]!,
          };
        }),
      ),
    );
    await Promise.all(sets.map((set) => writeForeignValue(cluster.admin, set.name)));
    await sleep(1_000);
    for (const set of sets) {
      expect(set.others.map(outcomeOf)).toEqual(['held', 'held', 'held']);
      if (set.main) expect(outcomeOf(set.victim)).toBe('lost:not-owner');
      else expect(['held', 'lost:not-owner']).toContain(outcomeOf(set.victim));
    }
    await Promise.all(sets.flatMap((set) => set.others.map((lock) => lock.release())));
    await Promise.all(
      sets.filter((set) => set.victim.isHeld).map((set) => set.victim.release().catch(() => false)),
    );
    await Promise.all(sets.map((set) => cluster.admin.del(set.name)));
  },
);
