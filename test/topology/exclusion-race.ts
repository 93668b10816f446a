import type { RedisLockModuleOptions } from 'nestjs-redis-lock';
import { spawnWorker, type Worker } from '../support/processes';
import { redisClient, SHARED_REDIS_URL } from '../support/shared-redis';

/** Separate Node processes that race on one counter (see fixtures/topology-counter-worker.ts). */
export interface Racers {
  /** All workers run `run` at once; resolves the final counter (expected: `expected`). */
  race(run: string, useLock: boolean): Promise<number>;
  /** Increments a race must count when no update was lost. */
  readonly expected: number;
  /** Tells every worker to close its LockService and exit, and waits for clean exits. */
  close(): Promise<void>;
}

/**
 * Spawns `processes` workers that lock through `lock` (a Cluster or Redlock configuration) and
 * keep their counters on the shared Redis under `prefix` (delete them with `deleteKeys`).
 */
export async function startRacers(
  processes: number,
  iterations: number,
  prefix: string,
  lock: RedisLockModuleOptions,
): Promise<Racers> {
  const workers: Worker[] = Array.from({ length: processes }, () =>
    spawnWorker('test/topology/fixtures/topology-counter-worker.ts', {
      LOCK_OPTIONS: JSON.stringify(lock),
      COUNTER_URL: SHARED_REDIS_URL,
      PREFIX: prefix,
      ITERATIONS: String(iterations),
    }),
  );
  await Promise.all(workers.map((worker) => worker.waitForOutput(/^ready$/m, 30_000)));
  const counters = redisClient();
  return {
    expected: processes * iterations,
    async race(run, useLock) {
      for (const worker of workers) worker.send(`${run} ${useLock ? 'lock' : 'nolock'}`);
      const done = new RegExp(`^done ${run}$`, 'm');
      await Promise.all(workers.map((worker) => worker.waitForOutput(done, 60_000)));
      return Number(await counters.get(`${prefix}${run}:counter`));
    },
    async close() {
      for (const worker of workers) worker.send('exit');
      try {
        await Promise.all(workers.map((worker) => worker.succeeded()));
      } finally {
        await counters.quit();
      }
    },
  };
}
