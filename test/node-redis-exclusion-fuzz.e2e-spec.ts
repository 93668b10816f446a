/**
 * The exclusion fuzz of `exclusion-fuzz.e2e-spec.ts` with node-redis in every process: each one
 * increments one counter with a non-atomic GET → sleep(1 ms) → SET through a node-redis client,
 * and locks through the same client. Two increments that overlap lose an update, so the final
 * count equals processes × iterations only if no two holders ever overlapped.
 */
import { killAllWorkers, spawnWorker, type Worker } from './support/processes';
import { deleteKeys, redisClient, SHARED_REDIS_URL } from './support/shared-redis';
import { uniquePrefix } from './support/unique-prefix';

const PROCESSES = 4;
const ITERATIONS = 200;
const EXPECTED = PROCESSES * ITERATIONS;

const prefix = uniquePrefix('fuzz-node-redis');
const redis = redisClient();
let workers: Worker[] = [];

beforeAll(async () => {
  workers = Array.from({ length: PROCESSES }, () =>
    spawnWorker('test/fixtures/counter-worker.ts', {
      REDIS_URL: SHARED_REDIS_URL,
      PREFIX: prefix,
      ITERATIONS: String(ITERATIONS),
      CLIENT: 'node-redis',
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

describe(`node-redis in ${PROCESSES} processes × ${ITERATIONS} read-modify-write cycles`, () => {
  it('loses no update when every cycle runs under withLock()', async () => {
    expect(await race('locked', 'lock')).toBe(EXPECTED);
  });

  it('loses no update in fair mode', async () => {
    expect(await race('fair', 'fair')).toBe(EXPECTED);
  });

  it('loses updates without the lock, so the check above can fail', async () => {
    const count = await race('unlocked', 'nolock');
    process.stdout.write(`node-redis fuzz control: ${count} of ${EXPECTED} increments kept\n`);
    expect(count).toBeLessThan(EXPECTED);
  });

  it('lets every worker exit cleanly', async () => {
    for (const worker of workers) worker.end();
    await Promise.all(workers.map((worker) => worker.succeeded()));
  });
});
