/**
 * Exclusion checked the Jepsen way: separate Node processes each increment one Redis
 * counter with a non-atomic GET → sleep(1 ms) → SET. Two increments that overlap lose an update,
 * so the final count equals processes × iterations only if no two holders ever overlapped.
 */
import { killAllWorkers, spawnWorker, type Worker } from './support/processes';
import { deleteKeys, redisClient, SHARED_REDIS_URL } from './support/shared-redis';
import { uniquePrefix } from './support/unique-prefix';

const PROCESSES = 4;
const ITERATIONS = 200;
const EXPECTED = PROCESSES * ITERATIONS;

const prefix = uniquePrefix('fuzz');
const redis = redisClient();
let workers: Worker[] = [];

beforeAll(async () => {
  workers = Array.from({ length: PROCESSES }, () =>
    spawnWorker('test/fixtures/counter-worker.ts', {
      REDIS_URL: SHARED_REDIS_URL,
      PREFIX: prefix,
      ITERATIONS: String(ITERATIONS),
    }),
  );
  await Promise.all(workers.map((worker) => worker.waitForOutput(/^ready$/m)));
});

afterAll(async () => {
  await killAllWorkers();
  await deleteKeys(redis, prefix);
  await redis.quit();
});

/** Starts one run in every worker at once; resolves the final count of its counter. */
async function race(name: string, mode: 'lock' | 'fair' | 'nolock'): Promise<number> {
  for (const worker of workers) worker.send(`run ${name} ${mode}`);
  const done = new RegExp(`^done ${name}$`, 'm');
  await Promise.all(workers.map((worker) => worker.waitForOutput(done, 30_000)));
  return Number(await redis.get(`${prefix}${name}:counter`));
}

describe(`exclusion across ${PROCESSES} processes × ${ITERATIONS} read-modify-write cycles`, () => {
  it('loses no update when every cycle runs under withLock()', async () => {
    expect(await race('locked', 'lock')).toBe(EXPECTED);
  });

  it('loses no update in fair mode (hand-offs granted by the release script)', async () => {
    expect(await race('fair', 'fair')).toBe(EXPECTED);
  });

  it('loses updates without the lock, so the check above can fail', async () => {
    expect(await race('unlocked', 'nolock')).toBeLessThan(EXPECTED);
  });

  it('lets every worker exit cleanly', async () => {
    for (const worker of workers) worker.end();
    await Promise.all(workers.map((worker) => worker.succeeded()));
  });
});
