/**
 * `@Cron` every second under `@WhenLeader` on 3 Nest replicas (fixtures/leader-worker.ts with
 * NEST=1, campaigning through the module's `leaders` option): every replica's timer fires each
 * tick, exactly one runs the job — always the current leader — and after the leader shuts down
 * gracefully, half-way between two ticks, its successor runs the next ones.
 */
import { killAllWorkers, spawnWorker, type Worker } from '../support/processes';
import { deleteKeys, redisClient, SHARED_REDIS_URL } from '../support/shared-redis';
import { sleep, waitFor } from '../support/time';
import { uniquePrefix } from '../support/unique-prefix';
import { eventsOf } from './leader-log';

const prefix = uniquePrefix('leader-cron');
const redis = redisClient();
const TICKS = 20;

afterAll(async () => {
  await killAllWorkers();
  await deleteKeys(redis, prefix);
  await redis.quit();
});

interface Run {
  worker: number;
  second: number;
  term: number;
  at: number;
}

function runsOf(workers: readonly Worker[]): Run[] {
  return workers.flatMap((worker, index) =>
    [...worker.stdout.matchAll(/^ran (\d+) (\d+) ([\d.]+)$/gm)].map(([, second, term, at]) => ({
      worker: index,
      second: Number(second),
      term: Number(term),
      at: Number(at),
    })),
  );
}

it(`runs a @Cron job on exactly one of 3 replicas, the leader, for ${TICKS} ticks`, async () => {
  const workers = Array.from({ length: 3 }, () =>
    spawnWorker('test/leader/fixtures/leader-worker.ts', {
      REDIS_URL: SHARED_REDIS_URL,
      PREFIX: prefix,
      ROLE: 'scheduler',
      LEASE: '5000',
      NEST: '1',
    }),
  );
  await Promise.all(workers.map((worker) => worker.waitForOutput(/^ready$/m, 40_000)));
  const outputs = () => workers.map((worker) => worker.stdout);
  await waitFor(() => eventsOf(outputs()).some((e) => e.what === 'elected'), 10_000);
  const firstSecond = Math.ceil(Date.now() / 1000) + 1; // every replica's timers run by then
  const lastSecond = firstSecond + TICKS - 1;
  // Half-way through, half-way between two ticks: the leader shuts down and hands over.
  const handOverAt = (firstSecond + TICKS / 2) * 1000 + 500;
  await sleep(handOverAt - Date.now());
  const first = eventsOf(outputs()).find((e) => e.what === 'elected')!;
  workers[first.worker]!.send('close');
  await waitFor(() => Date.now() > (lastSecond + 1) * 1000 + 300, 30_000, 50);

  const events = eventsOf(outputs());
  const runs = runsOf(workers).filter((r) => r.second >= firstSecond && r.second <= lastSecond);
  const perTick = new Map<number, Run[]>();
  for (const run of runs) perTick.set(run.second, [...(perTick.get(run.second) ?? []), run]);
  const counts = Array.from({ length: TICKS }, (_, i) => perTick.get(firstSecond + i)?.length ?? 0);
  console.log(`cron: runs per tick ${counts.join(',')}`);
  expect(counts).toEqual(Array(TICKS).fill(1));
  for (const run of runs) {
    // The current leader: the last election before the run is this worker's, in this term.
    const elected = events.filter((e) => e.what === 'elected' && e.at <= run.at).at(-1)!;
    expect({ worker: elected.worker, term: elected.term }).toEqual({
      worker: run.worker,
      term: run.term,
    });
  }
  expect(new Set(runs.map((run) => run.worker)).size).toBe(2); // the leader, then its successor
}, 60_000);
