/**
 * Fair semaphores across processes: separate Node processes running `fair: true` services (each
 * an app instance) wait for the permits of one key. Under fair mode the N-permit bound holds as
 * it does in plain order (control: the same sections without the semaphore exceed N); waiters in
 * different processes are served in the order they queued; and a queued waiter whose process is
 * SIGKILLed holds the queue up for no longer than its entry lifetime.
 */
import type { LockHandle } from 'nestjs-redis-lock';
import { lockServices } from '../support/lock-services';
import { killAllWorkers, spawnWorker, type Worker } from '../support/processes';
import { deleteKeys, redisClient, SHARED_REDIS_URL } from '../support/shared-redis';
import { now, waitFor } from '../support/time';
import { uniquePrefix } from '../support/unique-prefix';

const PERMITS = 2;
const PROCESSES = 5;
const ITERATIONS = 60;
/** A queue entry lives max(1000, 2 × 500) = 1 s without a refresh. */
const COMMAND_TIMEOUT = 500;
const ENTRY_LIFETIME = 1_000;

const prefix = uniquePrefix('sem-fair-fuzz');
const redis = redisClient();
/** The test's own holders: a fair service too, so its releases hand their permits on. */
const services = lockServices({ redis: SHARED_REDIS_URL, prefix, fair: true });
let workers: Worker[] = [];

/** The permits' sorted set: the lock's own name. */
const permitsKey = (key: string): string => `${prefix}{${key}}`;
const queueKey = (key: string): string => `${prefix}{${key}}:permits:queue`;

beforeAll(async () => {
  workers = Array.from({ length: PROCESSES }, () =>
    spawnWorker('test/fixtures/semaphore-worker.ts', {
      REDIS_URL: SHARED_REDIS_URL,
      PREFIX: prefix,
      ITERATIONS: String(ITERATIONS),
      PERMITS: String(PERMITS),
      TTL: '1000',
      FAIR: '1',
      COMMAND_TIMEOUT: String(COMMAND_TIMEOUT),
    }),
  );
  // Five processes transpiling at once start slowly on a loaded machine.
  await Promise.all(workers.map((worker) => worker.waitForOutput(/^ready$/m, 90_000)));
}, 120_000);

afterAll(async () => {
  await killAllWorkers();
  await services.closeAll();
  await deleteKeys(redis, prefix);
  await redis.quit();
});

/** Starts one run in every worker at once; resolves the highest number of sections at once. */
async function race(name: string, mode: 'sem' | 'nolock'): Promise<number> {
  for (const worker of workers) worker.send(`run ${name} ${mode}`);
  const done = new RegExp(`^done ${name}$`, 'm');
  await Promise.all(workers.map((worker) => worker.waitForOutput(done, 60_000)));
  expect(await redis.get(`${prefix}${name}:active`)).toBe('0');
  return Number(await redis.get(`${prefix}${name}:max`));
}

/** The test holds all N permits of `key` (30 s leases, renewed), through a fair service. */
function holdAll(key: string): Promise<LockHandle[]> {
  const holder = services.create({ ttl: 30_000 });
  return Promise.all(
    Array.from({ length: PERMITS }, () => holder.acquire(key, { permits: PERMITS })),
  );
}

/** Has `worker` queue for a permit of `key`, and resolves once the queue holds `length` waiters. */
async function queueIn(worker: Worker, key: string, length: number): Promise<void> {
  worker.send(`hold ${key}`);
  await waitFor(async () => (await redis.zcard(queueKey(key))) === length, 10_000, 5);
}

const holding = (key: string) => new RegExp(`^holding ${key} `, 'm');

/** Has `worker` release its permit of `key`, and resolves once it did. */
async function releaseIn(worker: Worker, key: string): Promise<void> {
  worker.send(`release ${key}`);
  await worker.waitForOutput(new RegExp(`^released ${key}$`, 'm'));
}

describe(`a fair semaphore of ${PERMITS} permits across ${PROCESSES} processes`, () => {
  it(`never lets more than ${PERMITS} sections run at once, and does let ${PERMITS} run together`, async () => {
    expect(await race('bounded', 'sem')).toBe(PERMITS);
  });

  it(`lets more than ${PERMITS} run at once without the semaphore, so the check above can fail`, async () => {
    expect(await race('control', 'nolock')).toBeGreaterThan(PERMITS);
  });

  it('serves waiters in four processes in the order they queued, one freed permit at a time', async () => {
    const held = await holdAll('order');
    const waiters = workers.slice(0, 4);
    for (const [i, worker] of waiters.entries()) await queueIn(worker, 'order', i + 1);
    // Each freed permit goes to the first in line; nobody behind it gets one meanwhile. The
    // permits: the test's two, then those of the first two waiters.
    const frees: (() => Promise<unknown>)[] = [
      () => held[0]!.release(),
      () => held[1]!.release(),
      () => releaseIn(waiters[0]!, 'order'),
      () => releaseIn(waiters[1]!, 'order'),
    ];
    for (const [i, free] of frees.entries()) {
      await free();
      await waiters[i]!.waitForOutput(holding('order'), 10_000);
      for (const later of waiters.slice(i + 1)) expect(later.stdout).not.toMatch(holding('order'));
      expect(await redis.zcard(permitsKey('order'))).toBe(PERMITS);
    }
    await Promise.all(waiters.slice(2).map((worker) => releaseIn(worker, 'order')));
    expect(await redis.exists(permitsKey('order'), queueKey('order'))).toBe(0);
  });

  it('lets a SIGKILLed queued waiter hold the queue up for at most its entry lifetime', async () => {
    const [dead, alive] = workers.slice(0, 2) as [Worker, Worker];
    const held = await holdAll('crash');
    await queueIn(dead, 'crash', 1);
    await queueIn(alive, 'crash', 2);
    dead.kill('SIGKILL');
    await dead.exited;
    const killedAt = now();
    // The freed permit goes to the first live entry: the dead waiter's, if it has not lapsed yet
    // (with a lease no longer than what is left of that entry), else the live waiter's.
    await held[0]!.release();
    expect(await redis.zcard(permitsKey('crash'))).toBeLessThanOrEqual(PERMITS);
    await alive.waitForOutput(holding('crash'), 10_000);
    const took = now() - killedAt;
    // One entry lifetime from the dead waiter's last refresh, plus the live waiter's next try
    // (it refreshes every lifetime / 3); generous for a loaded machine, far below the 30 s ttl
    // that a permit handed over with the full ttl would have blocked for.
    expect(took).toBeLessThan(ENTRY_LIFETIME + 3_000);
    expect(await redis.zcard(permitsKey('crash'))).toBe(PERMITS);
    expect(await redis.zcard(queueKey('crash'))).toBe(0);
    await releaseIn(alive, 'crash');
    await held[1]!.release();
  });

  it('does not hand a stopped waiter a permit whose hand-off lapsed meanwhile: never N + 1', async () => {
    const stopped = workers[2]!;
    const held = await holdAll('stopped');
    await queueIn(stopped, 'stopped', 1);
    stopped.kill('SIGSTOP');
    try {
      await held[0]!.release(); // handed to the stopped waiter, its grant message unread
      // That hand-off lends at most its 1 s entry lifetime: wait until the place is free again.
      const newcomer = services.create();
      let taken: LockHandle | null = null;
      await waitFor(async () => {
        taken = await newcomer.tryAcquire('stopped', { permits: PERMITS });
        return taken !== null;
      }, 10_000);
      stopped.kill('SIGCONT'); // it reads the grant now, long after that lease ended
      // It must queue again (N held: held[1] and the newcomer), never report a permit.
      const outcome = await Promise.race([
        stopped.waitForOutput(holding('stopped'), 10_000).then(() => 'holding'),
        waitFor(async () => (await redis.zcard(queueKey('stopped'))) === 1, 10_000, 5).then(
          () => 'queued again',
        ),
      ]);
      expect(outcome).toBe('queued again');
      await taken!.release(); // handed to it now
      await stopped.waitForOutput(holding('stopped'), 10_000);
      await releaseIn(stopped, 'stopped');
    } finally {
      stopped.kill('SIGCONT');
      await held[1]!.release();
    }
  });
});
