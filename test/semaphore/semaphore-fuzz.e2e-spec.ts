/**
 * The N-permit bound checked across processes: PROCESSES separate Node processes (more than
 * PERMITS) each run short sections that count themselves in and out of a Redis counter, keeping
 * the highest count seen. Under the semaphore it never exceeds PERMITS; without it, it does (the
 * control run, which shows the check can fail). Then a holder is SIGKILLed: its permit frees
 * within its ttl, and a waiter in another process gets it.
 */
import { killAllWorkers, spawnWorker, type Worker } from '../support/processes';
import { deleteKeys, redisClient, SHARED_REDIS_URL } from '../support/shared-redis';
import { now, sleep } from '../support/time';
import { uniquePrefix } from '../support/unique-prefix';

const PERMITS = 2;
const PROCESSES = 5;
const ITERATIONS = 60;
const TTL = 1_000;

const prefix = uniquePrefix('sem-fuzz');
const redis = redisClient();
let workers: Worker[] = [];

beforeAll(async () => {
  workers = Array.from({ length: PROCESSES }, () =>
    spawnWorker('test/fixtures/semaphore-worker.ts', {
      REDIS_URL: SHARED_REDIS_URL,
      PREFIX: prefix,
      ITERATIONS: String(ITERATIONS),
      PERMITS: String(PERMITS),
      TTL: String(TTL),
    }),
  );
  await Promise.all(workers.map((worker) => worker.waitForOutput(/^ready$/m)));
});

afterAll(async () => {
  await killAllWorkers();
  await deleteKeys(redis, prefix);
  await redis.quit();
});

/** Starts one run in every worker at once; resolves the highest number of sections at once. */
async function race(name: string, mode: 'sem' | 'nolock'): Promise<number> {
  for (const worker of workers) worker.send(`run ${name} ${mode}`);
  const done = new RegExp(`^done ${name}$`, 'm');
  await Promise.all(workers.map((worker) => worker.waitForOutput(done, 30_000)));
  expect(await redis.get(`${prefix}${name}:active`)).toBe('0');
  return Number(await redis.get(`${prefix}${name}:max`));
}

describe(`a semaphore of ${PERMITS} permits across ${PROCESSES} processes`, () => {
  it(`never lets more than ${PERMITS} sections run at once, and does let ${PERMITS} run together`, async () => {
    expect(await race('bounded', 'sem')).toBe(PERMITS);
  });

  it(`lets more than ${PERMITS} run at once without the semaphore, so the check above can fail`, async () => {
    expect(await race('control', 'nolock')).toBeGreaterThan(PERMITS);
  });

  it('frees a SIGKILLed holder’s permit within its ttl, and a waiter in another process takes it', async () => {
    const [first, second, waiter] = workers as [Worker, Worker, Worker];
    first.send('hold crash');
    second.send('hold crash');
    await first.waitForOutput(/^holding crash/m);
    await second.waitForOutput(/^holding crash/m);
    waiter.send('hold crash');
    await sleep(300);
    expect(waiter.stdout).not.toMatch(/^holding crash/m); // both permits are taken
    const killedAt = now();
    first.kill('SIGKILL');
    await first.exited;
    await waiter.waitForOutput(/^holding crash/m, 10_000);
    const took = now() - killedAt;
    // The crashed permit ends within one ttl of its last renewal; the waiter's fallback timer
    // (the soonest lease end) wakes it then. Generous bound for a loaded machine.
    expect(took).toBeLessThan(TTL + 2_000);
    expect(await redis.zcard(`${prefix}{crash}`)).toBe(PERMITS);
  });
});
