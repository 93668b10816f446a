/**
 * SEM — semaphore throughput: one key, PERMITS permits, LOOPS concurrent loops in one process,
 * each acquire → critical section → release, for a fixed time. Ours (`permits`) against
 * redis-semaphore's `Semaphore`, interleaved (each repetition starts with the other library).
 * Also checks the bound: the most sections seen at once must never exceed PERMITS.
 */
import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';
import { LockService } from 'nestjs-redis-lock';
import { Semaphore } from 'redis-semaphore';
import { combine, percentile, sleep } from './stats';
import { deleteKeys } from './redis-server';

export const SEM = {
  permits: 3,
  loops: 16,
  criticalMs: 1,
  ms: Number(process.env.BENCH_SEM_MS ?? 2_000),
  /** Lease and wait budget: redis-semaphore's defaults (lockTimeout, acquireTimeout). */
  ttl: 10_000,
  wait: 10_000,
};

export interface SemaphoreMetrics extends Record<string, number> {
  opsPerSec: number;
  waitP50: number;
  waitP99: number;
  maxConcurrent: number;
  /** Sections that ran while PERMITS others did (the bound broken). */
  violations: number;
  errors: number;
}

export type SemaphoreResults = Record<
  string,
  { settings: string; runs: SemaphoreMetrics[]; median: SemaphoreMetrics }
>;

interface SemaphoreSide {
  id: string;
  settings: string;
  open(url: string): Promise<{
    acquire(key: string): Promise<() => Promise<unknown>>;
    close(): Promise<void>;
  }>;
}

const SIDES: SemaphoreSide[] = [
  {
    id: 'ours',
    settings: `new LockService({ redis, prefix }); acquire(key, { permits: ${SEM.permits}, ttl: ${SEM.ttl}, wait: ${SEM.wait} }); waiters woken by the release message`,
    async open(url) {
      const locks = new LockService({ redis: url, prefix: 'bench:sem:' });
      await (await locks.acquire(`warmup:${randomUUID()}`, { permits: SEM.permits })).release();
      return {
        async acquire(key) {
          const lock = await locks.acquire(key, {
            permits: SEM.permits,
            ttl: SEM.ttl,
            wait: SEM.wait,
          });
          return () => lock.release();
        },
        close: () => locks.close(),
      };
    },
  },
  {
    id: 'redis-semaphore',
    settings: `new Semaphore(client, key, ${SEM.permits}) — defaults lockTimeout 10000, acquireTimeout 10000, retryInterval 10 (polling); one Semaphore per acquisition`,
    async open(url) {
      const client = new Redis(url);
      client.on('error', () => undefined);
      await client.ping();
      return {
        async acquire(key) {
          const semaphore = new Semaphore(client, `bench:${key}`, SEM.permits);
          await semaphore.acquire();
          return () => semaphore.release();
        },
        close: async () => void (await client.quit()),
      };
    },
  },
];

async function once(side: SemaphoreSide, url: string): Promise<SemaphoreMetrics> {
  const session = await side.open(url);
  const key = `s-sem:${randomUUID().slice(0, 8)}`;
  const waits: number[] = [];
  let active = 0;
  let maxConcurrent = 0;
  let violations = 0;
  let errors = 0;
  const endAt = performance.now() + SEM.ms;
  try {
    await Promise.all(
      Array.from({ length: SEM.loops }, async () => {
        while (performance.now() < endAt) {
          const asked = performance.now();
          let release: () => Promise<unknown>;
          try {
            release = await session.acquire(key);
          } catch {
            errors++;
            continue;
          }
          waits.push(performance.now() - asked);
          if (++active > SEM.permits) violations++;
          maxConcurrent = Math.max(maxConcurrent, active);
          await sleep(SEM.criticalMs);
          active--;
          await release();
        }
      }),
    );
  } finally {
    await session.close();
  }
  return {
    opsPerSec: waits.length / (SEM.ms / 1_000),
    waitP50: percentile(waits, 50),
    waitP99: percentile(waits, 99),
    maxConcurrent,
    violations,
    errors,
  };
}

/** `reps` interleaved repetitions of both sides; medians, violations and errors summed. */
export async function runSemaphoreBench(
  url: string,
  reps: number,
  log: (message: string) => void,
): Promise<SemaphoreResults> {
  const runs: Record<string, SemaphoreMetrics[]> = {};
  for (let rep = 0; rep < reps; rep++) {
    const order = SIDES.map((_, i) => SIDES[(i + rep) % SIDES.length]);
    for (const side of order) {
      const m = await once(side, url);
      (runs[side.id] ??= []).push(m);
      log(
        `SEM rep ${rep + 1} ${side.id}: ${m.opsPerSec.toFixed(0)} ops/s, wait p99 ${m.waitP99.toFixed(1)} ms, ` +
          `max ${m.maxConcurrent} at once, violations ${m.violations}, errors ${m.errors}`,
      );
    }
  }
  await deleteKeys(url, ['bench:sem:*', 'semaphore:bench:*']);
  const out: SemaphoreResults = {};
  for (const side of SIDES) {
    const sideRuns = runs[side.id] ?? [];
    out[side.id] = {
      settings: side.settings,
      runs: sideRuns,
      median: combine(sideRuns, ['violations', 'errors'], ['maxConcurrent']),
    };
  }
  return out;
}

/** The report's section on SEM. */
export function renderSemaphore(results: SemaphoreResults): string[] {
  const rows = Object.entries(results).map(
    ([id, { median: m }]) =>
      `| ${id} | ${m.opsPerSec.toFixed(0)} | ${m.waitP50.toFixed(1)} | ${m.waitP99.toFixed(1)} | ${m.maxConcurrent} | ${m.violations} | ${m.errors} |`,
  );
  return [
    `## SEM — semaphore, one key, ${SEM.permits} permits, ${SEM.loops} loops, ${SEM.criticalMs} ms sections, ${SEM.ms / 1_000} s`,
    '',
    '| Library | ops/s | wait p50 (ms) | wait p99 (ms) | most at once | violations | errors |',
    '| :-- | --: | --: | --: | --: | --: | --: |',
    ...rows,
    '',
    ...Object.entries(results).map(([id, { settings }]) => `- **${id}** — ${settings}`),
    '',
  ];
}
