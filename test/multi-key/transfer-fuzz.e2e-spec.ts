/**
 * Multi-key exclusion checked across processes: separate Node processes move money between random
 * pairs of accounts with a non-atomic read → sleep → write of both balances, each transfer under
 * `withLock([from, to])`. The total is conserved only if no two transfers on a shared account ever
 * overlapped; every run finishes within a bound (no deadlock) and no call waits past its budget or
 * gives up. The control run without the lock shows the total drifting.
 */
import { killAllWorkers, spawnWorker, type Worker } from '../support/processes';
import { deleteKeys, redisClient, SHARED_REDIS_URL } from '../support/shared-redis';
import { uniquePrefix } from '../support/unique-prefix';

const PROCESSES = 4;
const ITERATIONS = 150;
const ACCOUNTS = 6;
const OPENING = 1_000;
const WAIT_BUDGET = 10_000;
/** A run that takes longer than this has stalled: a deadlock would. */
const RUN_BOUND = 45_000;

const prefix = uniquePrefix('transfer-fuzz');
const redis = redisClient();
let workers: Worker[] = [];

beforeAll(async () => {
  workers = Array.from({ length: PROCESSES }, () =>
    spawnWorker('test/fixtures/transfer-worker.ts', {
      REDIS_URL: SHARED_REDIS_URL,
      PREFIX: prefix,
      ITERATIONS: String(ITERATIONS),
      ACCOUNTS: String(ACCOUNTS),
      WAIT_BUDGET: String(WAIT_BUDGET),
    }),
  );
  await Promise.all(workers.map((worker) => worker.waitForOutput(/^ready$/m, 30_000)));
}, 40_000);

afterAll(async () => {
  await killAllWorkers();
  await deleteKeys(redis, prefix);
  await redis.quit();
});

/** Opens the accounts, runs every worker at once; resolves the total and the workers' reports. */
async function race(name: string, mode: 'lock' | 'fair' | 'nolock') {
  const balances = Array.from({ length: ACCOUNTS }, (_, i) => `${prefix}${name}:balance:${i}`);
  await redis.mset(...balances.flatMap((key) => [key, OPENING]));
  for (const worker of workers) worker.send(`run ${name} ${mode}`);
  const done = new RegExp(`^done ${name} (\\d+) (\\d+)$`, 'm');
  const reports = await Promise.all(workers.map((worker) => worker.waitForOutput(done, RUN_BOUND)));
  const total = (await redis.mget(...balances)).reduce((sum, value) => sum + Number(value), 0);
  return {
    total,
    longestWait: Math.max(...reports.map((match) => Number(match[1]))),
    gaveUp: reports.reduce((sum, match) => sum + Number(match[2]), 0),
  };
}

describe(`transfers across ${PROCESSES} processes × ${ITERATIONS} between ${ACCOUNTS} accounts`, () => {
  it('conserves the total under withLock([from, to]) (keys taken in one step)', async () => {
    const { total, longestWait, gaveUp } = await race('locked', 'lock');
    expect(gaveUp).toBe(0);
    expect(longestWait).toBeLessThanOrEqual(WAIT_BUDGET);
    expect(total).toBe(ACCOUNTS * OPENING);
  });

  it('conserves the total in fair mode (keys taken one by one in lock order)', async () => {
    const { total, longestWait, gaveUp } = await race('fair', 'fair');
    expect(gaveUp).toBe(0);
    expect(longestWait).toBeLessThanOrEqual(WAIT_BUDGET);
    expect(total).toBe(ACCOUNTS * OPENING);
  });

  it('control: without the lock the total drifts, so the checks above can fail', async () => {
    // Lost updates can cancel out, and an unlocked run is over in a moment, so its workers may
    // barely overlap: the control gets up to 5 runs to show the drift (one is the usual).
    const totals: number[] = [];
    for (let run = 0; run < 5 && !totals.some((t) => t !== ACCOUNTS * OPENING); run++) {
      totals.push((await race(`unlocked${run}`, 'nolock')).total);
    }
    expect(totals.some((total) => total !== ACCOUNTS * OPENING)).toBe(true);
  });

  it('lets every worker exit cleanly', async () => {
    for (const worker of workers) worker.end();
    await Promise.all(workers.map((worker) => worker.succeeded()));
  });
});
