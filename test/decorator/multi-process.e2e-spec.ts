/**
 * A `@Locked('order:<userId>')` service method called at once from two Nest applications in two
 * Node processes sharing one Redis: the critical sections never overlap. The same run without the
 * lock does overlap — proof the check can fail.
 */
import type Redis from 'ioredis';
import { killAllWorkers, spawnWorker, type Worker } from '../support/processes';
import { deleteKeys, redisClient, SHARED_REDIS_URL } from '../support/shared-redis';
import { uniquePrefix } from '../support/unique-prefix';

const WORKER = 'test/decorator/fixtures/locked-service-worker.ts';
const PROCESSES = 2;
const LOOPS = 2;
const ITERATIONS = 10;

interface Interval {
  pid: number;
  start: number;
  end: number;
}

/** Spawns the worker processes of one run; they print "ready" once their Nest app is up. */
function startWorkers(prefix: string, useLock: boolean): Worker[] {
  return Array.from({ length: PROCESSES }, () =>
    spawnWorker(WORKER, {
      REDIS_URL: SHARED_REDIS_URL,
      PREFIX: prefix,
      USE_LOCK: useLock ? '1' : '0',
      LOOPS: String(LOOPS),
      ITERATIONS: String(ITERATIONS),
    }),
  );
}

/** Lets the workers race, and reads back every critical section they recorded. */
async function race(workers: Worker[], prefix: string, redis: Redis): Promise<Interval[]> {
  await Promise.all(workers.map((worker) => worker.waitForOutput(/^ready$/m, 30_000)));
  for (const worker of workers) worker.send('go');
  await Promise.all(workers.map((worker) => worker.succeeded()));

  const raw = await redis.lrange(`${prefix}intervals`, 0, -1);
  return raw.map((line) => {
    const [pid = NaN, start = NaN, end = NaN] = line.split(' ').map(Number);
    return { pid, start, end };
  });
}

/**
 * Pairs of intervals that overlap in time. The workers stamp them on the host's one monotonic
 * clock (`hostNow`), and a lock is released only after its holder stamped its end: any overlap
 * is real.
 */
function overlaps(intervals: Interval[]): [Interval, Interval][] {
  const sorted = [...intervals].sort((a, b) => a.start - b.start);
  const found: [Interval, Interval][] = [];
  for (const [i, next] of sorted.entries()) {
    const previous = sorted[i - 1];
    if (!previous) continue;
    if (next.start < previous.end) found.push([previous, next]);
  }
  return found;
}

describe('@Locked service method across two processes', () => {
  const lockedPrefix = uniquePrefix('decorator-procs-locked');
  const controlPrefix = uniquePrefix('decorator-procs-control');
  let redis: Redis;
  let lockedWorkers: Worker[];
  let controlWorkers: Worker[];

  beforeAll(() => {
    redis = redisClient();
    // Start all four apps at once: process start-up is most of this file's time.
    lockedWorkers = startWorkers(lockedPrefix, true);
    controlWorkers = startWorkers(controlPrefix, false);
  });

  afterAll(async () => {
    await killAllWorkers();
    await deleteKeys(redis, lockedPrefix);
    await deleteKeys(redis, controlPrefix);
    await redis.quit();
  });

  it('never runs two critical sections at once, and loses no update', async () => {
    const intervals = await race(lockedWorkers, lockedPrefix, redis);
    const total = PROCESSES * LOOPS * ITERATIONS;
    expect(intervals).toHaveLength(total);
    // Both processes really took part.
    expect(new Set(intervals.map((interval) => interval.pid)).size).toBe(PROCESSES);
    expect(overlaps(intervals)).toEqual([]);
    expect(Number(await redis.get(`${lockedPrefix}counter:user-1`))).toBe(total);
    // Released after every call: nothing left holding the key.
    expect(await redis.exists(`${lockedPrefix}{order:user-1}`)).toBe(0);
  });

  it('control: without the lock the same calls overlap and lose updates', async () => {
    const intervals = await race(controlWorkers, controlPrefix, redis);
    const total = PROCESSES * LOOPS * ITERATIONS;
    expect(intervals).toHaveLength(total);
    expect(overlaps(intervals).length).toBeGreaterThan(0);
    expect(Number(await redis.get(`${controlPrefix}counter:user-1`))).toBeLessThan(total);
  });
});
