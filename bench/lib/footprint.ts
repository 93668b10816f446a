/**
 * S6c — what one held lock and one waiting caller cost: in this process (heap after GC) and in
 * Redis (MEMORY USAGE summed over every key the library wrote, and the server's used_memory),
 * for ours in its default mode and with `fair: true`, next to redis-semaphore's Mutex.
 */
import { randomUUID } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import Redis from 'ioredis';
import { commandStats } from './commands';
import { ours, redisSemaphore, type Side, type Subject } from './footprint-subjects';
import { gc } from './memory';
import { deleteKeys } from './redis-server';
import { nowUs, sleep } from './stats';

interface Snapshot {
  heap: number;
  usedMemory: number;
  keys: number;
  keyBytes: number;
  byKind: Record<string, number>;
  lockKeyChars: number;
}

async function snapshot(stats: Redis, subject: Subject): Promise<Snapshot> {
  // Let replies, timers and Redis' lazy frees settle; the heap is read before SCAN allocates.
  await sleep(200);
  gc();
  const heap = process.memoryUsage().heapUsed;
  const usedMemory = Number(/^used_memory:(\d+)/m.exec(await stats.info('memory'))?.[1] ?? NaN);
  let keys = 0;
  let keyBytes = 0;
  let lockKeyChars = 0;
  let lockKeys = 0;
  const byKind: Record<string, number> = {};
  let cursor = '0';
  do {
    const [next, batch] = await stats.scan(cursor, 'MATCH', subject.pattern, 'COUNT', 1000);
    cursor = next;
    const pipeline = stats.pipeline();
    for (const key of batch) pipeline.memory('USAGE', key, 'SAMPLES', 0);
    const sizes = (await pipeline.exec()) ?? [];
    batch.forEach((key, i) => {
      const bytes = Number(sizes[i]?.[1] ?? 0);
      const kind = subject.kindOf(key);
      keys++;
      keyBytes += bytes;
      byKind[kind] = (byKind[kind] ?? 0) + bytes;
      if (kind === 'lock') {
        lockKeys++;
        lockKeyChars += Buffer.byteLength(key);
      }
    });
  } while (cursor !== '0');
  return {
    heap,
    usedMemory,
    keys,
    keyBytes,
    byKind,
    lockKeyChars: lockKeys ? lockKeyChars / lockKeys : NaN,
  };
}

/** Cost per item: what `after` has more than `before`, divided by `n`. */
export interface Cost {
  heapBytes: number;
  /** MEMORY USAGE summed over the subject's keys. */
  redisKeyBytes: number;
  /** INFO memory used_memory: keys plus everything around them (expires, pub/sub, buffers). */
  redisUsedBytes: number;
  keys: number;
  /** MEMORY USAGE by kind of key ('lock', 'fence', 'holder', 'queue', …). */
  byKind: Record<string, number>;
}

function costOf(before: Snapshot, after: Snapshot, n: number): Cost {
  const byKind: Record<string, number> = {};
  for (const kind of new Set([...Object.keys(before.byKind), ...Object.keys(after.byKind)])) {
    const delta = ((after.byKind[kind] ?? 0) - (before.byKind[kind] ?? 0)) / n;
    if (delta !== 0) byKind[kind] = delta;
  }
  return {
    heapBytes: (after.heap - before.heap) / n,
    redisKeyBytes: (after.keyBytes - before.keyBytes) / n,
    redisUsedBytes: (after.usedMemory - before.usedMemory) / n,
    keys: (after.keys - before.keys) / n,
    byKind,
  };
}

/**
 * Holds `keys` in chunks: 10 k commands sent at once queue on one connection, and on a busy
 * machine the last ones outlast the library's command timeout.
 */
async function holdAll(side: Side, keys: string[]): Promise<(() => Promise<unknown>)[]> {
  const releases: (() => Promise<unknown>)[] = [];
  for (let from = 0; from < keys.length; from += 500) {
    releases.push(...(await Promise.all(keys.slice(from, from + 500).map((k) => side.hold(k)))));
  }
  return releases;
}

/** Releases in chunks, for the same reason. */
async function releaseAll(releases: (() => Promise<unknown>)[]): Promise<void> {
  for (let from = 0; from < releases.length; from += 500) {
    await Promise.all(releases.slice(from, from + 500).map((release) => release()));
  }
  releases.length = 0;
}

export interface WaiterCost extends Cost {
  /** Calls that ended before the snapshot (granted or given up): must be 0. */
  ended: number;
}

export interface FootprintSubject {
  id: string;
  label: string;
  settings: string;
  /** Mean length of a lock key's name in bytes (the other keys' names add a suffix). */
  lockKeyChars: number;
  held: Cost;
  /** The same locks released: what stays behind (ours: each fence counter, for fenceRetention). */
  released: Cost;
  /** N callers, each waiting on a key of its own that another instance holds. */
  waiterOwnKey: WaiterCost;
  /** N callers waiting on one key that another instance holds. */
  waiterOneKey: WaiterCost;
}

export interface FootprintResult {
  locks: number;
  waiters: number;
  subjects: FootprintSubject[];
}

async function measureHeld(subject: Subject, stats: Redis, n: number) {
  const side = await subject.open();
  try {
    const releaseWarm = await side.hold(`warm:${randomUUID()}`);
    await releaseWarm();
    const before = await snapshot(stats, subject);
    const releases = await holdAll(
      side,
      Array.from({ length: n }, (_, i) => `held:${i}`),
    );
    const during = await snapshot(stats, subject);
    await releaseAll(releases);
    const after = await snapshot(stats, subject);
    return {
      held: costOf(before, during, n),
      released: costOf(before, after, n),
      lockKeyChars: during.lockKeyChars,
    };
  } finally {
    await side.close();
  }
}

async function measureWaiters(
  subject: Subject,
  stats: Redis,
  n: number,
  keys: string[],
): Promise<WaiterCost> {
  const holder = await subject.open();
  const waiter = await subject.open();
  // One signal for every waiting call, so the bench adds no controller per call to the heap.
  const cancel = new AbortController();
  setMaxListeners(n + 10, cancel.signal);
  const calls: Promise<unknown>[] = [];
  let ended = 0;
  try {
    // One wait, cancelled, first: what a process pays once (ours: the subscriber connection).
    const warmRelease = await holder.hold('warm');
    const warmCancel = new AbortController();
    const warm = waiter.wait('warm', warmCancel.signal).catch(() => undefined);
    await sleep(200);
    warmCancel.abort();
    await warm;
    await warmRelease();

    const releases = await holdAll(holder, keys);
    const before = await snapshot(stats, subject);
    const tries0 = (await commandStats(stats))[subject.tryCommand] ?? 0;
    for (let i = 0; i < n; i++) {
      const call = waiter.wait(keys[i % keys.length], cancel.signal);
      calls.push(
        call.then(
          () => void ended++,
          () => void (cancel.signal.aborted || ended++),
        ),
      );
    }
    // Settled once every waiter made its tries before sleeping (bounded: a stuck run fails loudly).
    const deadline = nowUs() + 30e6;
    while (
      ((await commandStats(stats))[subject.tryCommand] ?? 0) - tries0 <
      subject.triesBeforeSleep * n
    ) {
      if (nowUs() > deadline)
        throw new Error(
          `S6 footprint: ${subject.label}'s ${n} waiters did not all try within 30 s`,
        );
      await sleep(20);
    }
    const during = await snapshot(stats, subject);
    const cost = { ...costOf(before, during, n), ended };
    cancel.abort();
    await Promise.all(calls);
    await releaseAll(releases);
    return cost;
  } finally {
    cancel.abort();
    await Promise.allSettled(calls);
    await Promise.all([holder.close(), waiter.close()]);
  }
}

/**
 * Per held lock: `locks` locks taken by one instance (chunks of 500), snapshot before and after,
 * then released (what stays behind). Per waiter: `waiters` callers of a second instance, each on
 * a key of its own, then all on one key, held by a first instance; snapshot once each has tried
 * and gone to sleep (redis-semaphore's never sleep: they poll every 10 ms).
 */
export async function s6Footprint(
  url: string,
  locks: number,
  waiters: number,
  log: (message: string) => void,
): Promise<FootprintResult> {
  const stats = new Redis(url);
  const run = randomUUID().slice(0, 6);
  const subjects = [ours(url, run, false), ours(url, run, true), redisSemaphore(url, run)];
  const out: FootprintSubject[] = [];
  try {
    for (const subject of subjects) {
      const held = await measureHeld(subject, stats, locks);
      await deleteKeys(url, [subject.pattern]);
      const ownKeys = Array.from({ length: waiters }, (_, i) => `busy:${i}`);
      const waiterOwnKey = await measureWaiters(subject, stats, waiters, ownKeys);
      await deleteKeys(url, [subject.pattern]);
      const waiterOneKey = await measureWaiters(subject, stats, waiters, ['busy']);
      await deleteKeys(url, [subject.pattern]);
      const result = {
        id: subject.id,
        label: subject.label,
        settings: subject.settings,
        ...held,
        waiterOwnKey,
        waiterOneKey,
      };
      out.push(result);
      log(
        `S6 footprint ${subject.label}: held ${Math.round(held.held.heapBytes)} B heap, ` +
          `${Math.round(held.held.redisKeyBytes)} B MEMORY USAGE in ${held.held.keys} keys, ${Math.round(held.held.redisUsedBytes)} B used_memory; ` +
          `waiter (own key) ${Math.round(waiterOwnKey.heapBytes)} B heap, ${Math.round(waiterOwnKey.redisKeyBytes)} / ${Math.round(waiterOwnKey.redisUsedBytes)} B Redis; ` +
          `waiter (one key) ${Math.round(waiterOneKey.heapBytes)} B heap, ${Math.round(waiterOneKey.redisKeyBytes)} / ${Math.round(waiterOneKey.redisUsedBytes)} B Redis`,
      );
    }
  } finally {
    for (const subject of subjects) await deleteKeys(url, [subject.pattern]);
    stats.disconnect();
  }
  return { locks, waiters, subjects: out };
}
