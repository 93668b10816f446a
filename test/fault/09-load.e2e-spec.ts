/**
 * Scenario 9 — load, checked the Jepsen way: PROCESSES separate Node processes each run CYCLES
 * non-atomic read → sleep(1 ms) → write increments spread over KEYS hot keys, under the lock. Any
 * two critical sections on one key that overlap lose an update, so every counter must end exactly
 * at the number of cycles run on its key; every wait stays within the budget; and each critical
 * section sees a strictly lower fence from its predecessor. The control run without the lock must
 * lose updates, or the check could not fail.
 *
 * Scale: the full scenario is 16 processes × 1,000 cycles on 8 keys (16,000 cycles, 2,000 hand-offs
 * in a row per key). On a 2-core machine shared with the rest of the suite that alone runs for
 * minutes, so `npm test` runs 16 processes × LOAD_CYCLES (default 100) cycles: the same
 * concurrency and contention, fewer rounds. `LOAD_CYCLES=1000` runs the full size.
 */
import Redis from 'ioredis';
import { killAllWorkers, spawnWorker, type Worker } from '../support/processes';
import { startRedis, stopAllRedis, type RedisServer } from '../support/redis-server';
import { now, waitFor } from '../support/time';
import { ms, observe, percentile } from './fault-support';

const PROCESSES = 16;
const CYCLES = Number(process.env.LOAD_CYCLES ?? 100);
const KEYS = 8;
const WAIT = 10_000;
const CONTROL_CYCLES = 50;
/** Generous bound for one run: 10 ms per cycle on a busy machine, plus process start-up. */
const RUN_TIMEOUT = 30_000 + PROCESSES * CYCLES * 10;

interface Report {
  took: number;
  waits: number[];
  errors: Record<string, number>;
  fenceViolations: number;
}

let server: RedisServer;
let redis: Redis;
let workers: Worker[];

/** The reports a worker printed so far, oldest first. */
function reportsOf(worker: Worker): Report[] {
  return worker.stdout
    .split('\n')
    .filter((line) => line.startsWith('report '))
    .map((line) => JSON.parse(line.slice('report '.length)) as Report);
}

/**
 * Lets every worker run `cycles` cycles at once, under the lock or not, with counters under
 * `prefix`; resolves their reports and the per-key counters.
 */
async function race(mode: 'locked' | 'unlocked', cycles: number, prefix: string) {
  await Promise.all(workers.map((worker) => worker.waitForOutput(/^ready$/m, 60_000)));
  const before = workers.map((worker) => reportsOf(worker).length);
  const started = now();
  for (const worker of workers) worker.send(`run ${mode} ${cycles} ${prefix}`);
  await waitFor(
    () => workers.every((worker, i) => reportsOf(worker).length > before[i]!),
    RUN_TIMEOUT,
    20,
  );
  const reports = workers.map((worker) => reportsOf(worker).at(-1)!);
  const took = now() - started;
  const counters = await Promise.all(
    Array.from({ length: KEYS }, async (_, key) =>
      Number((await redis.get(`${prefix}counter:hot:${key}`)) ?? 0),
    ),
  );
  return { reports, counters, took };
}

beforeAll(async () => {
  server = await startRedis();
  redis = new Redis(server.url);
  workers = Array.from({ length: PROCESSES }, (_, index) =>
    spawnWorker('test/fault/fixtures/load-worker.ts', {
      REDIS_URL: server.url,
      KEYS: String(KEYS),
      INDEX: String(index),
      WAIT: String(WAIT),
    }),
  );
});

afterAll(async () => {
  for (const worker of workers ?? []) worker.send('exit');
  await killAllWorkers();
  redis?.disconnect();
  await stopAllRedis();
});

describe(`scenario 9: ${PROCESSES} processes × ${CYCLES} lock cycles on ${KEYS} hot keys`, () => {
  it(
    'loses no update, keeps every wait within budget, and fences strictly increase',
    async () => {
      const { reports, counters, took } = await race('locked', CYCLES, 'locked:');
      const waits = reports.flatMap((report) => report.waits);
      const errors = reports.reduce<Record<string, number>>((all, report) => {
        for (const [name, count] of Object.entries(report.errors))
          all[name] = (all[name] ?? 0) + count;
        return all;
      }, {});
      const fenceViolations = reports.reduce((sum, report) => sum + report.fenceViolations, 0);
      const total = counters.reduce((sum, count) => sum + count, 0);

      observe('9-load', {
        processes: PROCESSES,
        cycles: CYCLES,
        keys: KEYS,
        waitBudget: WAIT,
        expected: PROCESSES * CYCLES,
        counted: total,
        errors,
        fenceViolations,
        waitP50: ms(percentile(waits, 50)),
        waitP99: ms(percentile(waits, 99)),
        waitMax: ms(Math.max(...waits)),
        took: ms(took),
        cyclesPerSecond: Math.round((PROCESSES * CYCLES) / (took / 1_000)),
      });
      expect(errors).toEqual({});
      expect(waits).toHaveLength(PROCESSES * CYCLES);
      expect(Math.max(...waits)).toBeLessThanOrEqual(WAIT);
      expect(fenceViolations).toBe(0);
      expect(counters).toEqual(Array(KEYS).fill((PROCESSES * CYCLES) / KEYS));
    },
    RUN_TIMEOUT + 60_000,
  );

  it('loses updates without the lock, so the check above can fail', async () => {
    const { counters } = await race('unlocked', CONTROL_CYCLES, 'control:');
    const total = counters.reduce((sum, count) => sum + count, 0);
    observe('9-control', {
      processes: PROCESSES,
      cycles: CONTROL_CYCLES,
      expected: PROCESSES * CONTROL_CYCLES,
      counted: total,
      lost: PROCESSES * CONTROL_CYCLES - total,
    });
    expect(total).toBeLessThan(PROCESSES * CONTROL_CYCLES);
  });
});
