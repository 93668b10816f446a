/**
 * A fast scheduled job on three replicas (separate Node processes, one Redis): `@Cron` every
 * second + `@Locked(…, { onBusy: 'skip', minHold })` runs exactly once per tick. The control —
 * the same job without `minHold`, in the same processes and ticks — runs twice in some ticks: the
 * first replica frees the key before another's timer fires, proof the test can fail.
 *
 * Runs are counted in Redis by the tick's scheduled second. A tick counts only when every replica's
 * timer reached it within `SPREAD_MS` of the others (each process stamps how late its timers fired):
 * a process stalled past the minimum hold by a loaded machine would run a tick again by design —
 * ShedLock's `lockAtLeastFor` has the same bound — and says nothing about the lock.
 */
import type Redis from 'ioredis';
import { killAllWorkers, spawnWorker, type Worker } from '../support/processes';
import { deleteKeys, redisClient, SHARED_REDIS_URL } from '../support/shared-redis';
import { sleep } from '../support/time';
import { uniquePrefix } from '../support/unique-prefix';

const WORKER = 'test/decorator/fixtures/cron-worker.ts';
const REPLICAS = 3;
const MIN_HOLD = 500;
/** Replicas' timers within this of each other make a tick count (well inside the minimum hold). */
const SPREAD_MS = 250;
const TICKS = 20;
/** Stop after this many seconds of ticks, whatever was seen (a bound, not a target). */
const MAX_SECONDS = 60;

const prefix = uniquePrefix('cron-ticks');
let redis: Redis;
let workers: Worker[] = [];

interface TickCounts {
  /** Ticks every replica reached together, with each job's runs in them. */
  ticks: { tick: number; guarded: number; control: number }[];
}

/** The finished ticks that count (every replica's timer fired, within SPREAD_MS). */
async function countedTicks(): Promise<TickCounts> {
  const [guarded, control] = await Promise.all([
    redis.hgetall(`${prefix}runs:guarded`),
    redis.hgetall(`${prefix}runs:control`),
  ]);
  const finished = Math.round(Date.now() / 1000) - 2; // every run of it has been counted
  const lateKeys = await redis.keys(`${prefix}late:*`);
  const ticks: TickCounts['ticks'] = [];
  for (const key of lateKeys) {
    const tick = Number(key.slice(`${prefix}late:`.length));
    if (tick > finished) continue;
    const late = Object.values(await redis.hgetall(key)).map(Number);
    if (late.length < REPLICAS || Math.max(...late) - Math.min(...late) > SPREAD_MS) continue;
    ticks.push({
      tick,
      guarded: Number(guarded[tick] ?? 0),
      control: Number(control[tick] ?? 0),
    });
  }
  return { ticks: ticks.sort((a, b) => a.tick - b.tick) };
}

beforeAll(async () => {
  redis = redisClient();
  workers = Array.from({ length: REPLICAS }, () =>
    spawnWorker(WORKER, {
      REDIS_URL: SHARED_REDIS_URL,
      PREFIX: prefix,
      MIN_HOLD: String(MIN_HOLD),
    }),
  );
  await Promise.all(workers.map((worker) => worker.waitForOutput(/^ready$/m, 30_000)));
}, 40_000);

afterAll(async () => {
  for (const worker of workers) worker.end();
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise((resolve) => (timer = setTimeout(resolve, 15_000)));
  await Promise.race([Promise.all(workers.map((worker) => worker.exited)), bound]);
  clearTimeout(timer);
  await killAllWorkers();
  await deleteKeys(redis, prefix);
  await redis.quit();
}, 30_000);

describe('a fast @Cron job under @Locked({ onBusy: "skip" }) on three replicas', () => {
  it('runs exactly once per tick with minHold; without it (the control) some tick runs twice', async () => {
    let seen: TickCounts = { ticks: [] };
    const started = Date.now();
    // Until TICKS ticks counted and the control showed its double run, within MAX_SECONDS.
    while (Date.now() - started < MAX_SECONDS * 1_000) {
      await sleep(1_000);
      seen = await countedTicks();
      const doubled = seen.ticks.some((tick) => tick.control > 1);
      if (seen.ticks.length >= TICKS && doubled) break;
    }
    const runsPerTick = (job: 'guarded' | 'control') => seen.ticks.map((tick) => tick[job]);
    const summary = {
      ticks: seen.ticks.length,
      guardedTwice: runsPerTick('guarded').filter((runs) => runs > 1).length,
      controlTwice: runsPerTick('control').filter((runs) => runs > 1).length,
    };
    console.log(`cron-ticks: ${JSON.stringify(summary)}`);

    expect(seen.ticks.length).toBeGreaterThanOrEqual(TICKS);
    // Every counted tick ran exactly once across the replicas: never twice, never skipped.
    expect(runsPerTick('guarded')).toEqual(seen.ticks.map(() => 1));
    // The control ran in every tick too (a replica always finds it free), and twice in some.
    expect(runsPerTick('control').every((runs) => runs >= 1)).toBe(true);
    expect(summary.controlTwice).toBeGreaterThan(0);
  }, 90_000);

  it('warns once at bootstrap about the job without a minimum hold, naming what to set', () => {
    for (const worker of workers) {
      const warned = worker.stdout.split('\n').filter((line) => line.includes('minHold'));
      expect(warned).toHaveLength(1);
      expect(warned[0]).toContain('SettlementJobs.control');
      expect(warned[0]).toContain("onBusy 'skip'");
    }
  });
});
