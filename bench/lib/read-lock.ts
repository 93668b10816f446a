import { LockService } from 'nestjs-redis-lock';
import { median, nowUs, sleep } from './stats';

/** One run of the read-lock scenario: ops/s of one mode, and its per-op latency. */
export interface ReadLockRun {
  mode: 'read' | 'write';
  opsPerSec: number;
  /** Median acquire + release latency (µs), waiting included. */
  p50Us: number;
  /** Each repetition's ops/s (`opsPerSec` is their median); absent in older results. */
  runs?: number[];
}

/** The read-lock scenario: read-lock throughput next to the exclusive lock, on one key. */
export interface ReadLockResult {
  loops: number;
  ms: number;
  read: ReadLockRun;
  write: ReadLockRun;
}

/**
 * `loops` concurrent callers acquire + release one key for `ms`, in `mode`. Readers share the
 * key, so their round trips overlap; writers take turns, each woken by the previous release.
 */
async function runMode(
  locks: LockService,
  key: string,
  mode: 'read' | 'write',
  loops: number,
  ms: number,
): Promise<{ ops: number; seconds: number; latencies: number[] }> {
  const latencies: number[] = [];
  const until = nowUs() + ms * 1_000;
  const started = nowUs();
  await Promise.all(
    Array.from({ length: loops }, async () => {
      while (nowUs() < until) {
        const t0 = nowUs();
        const lock = await locks.acquire(key, { mode, wait: 10_000 });
        await lock.release();
        latencies.push(nowUs() - t0);
      }
    }),
  );
  return { ops: latencies.length, seconds: (nowUs() - started) / 1e6, latencies };
}

/**
 * Read-write locks: `loops` (16) concurrent readers on one key, ops/s, next to as many writers
 * (the exclusive lock) on the same key; `reps` interleaved repetitions, medians reported.
 */
export async function readLockScenario(
  url: string,
  ms: number,
  reps: number,
  loops = 16,
): Promise<ReadLockResult> {
  const locks = new LockService({ redis: url, prefix: 'bench:rw:', startupCheck: 'off' });
  const runs: Record<'read' | 'write', { opsPerSec: number[]; p50Us: number[] }> = {
    read: { opsPerSec: [], p50Us: [] },
    write: { opsPerSec: [], p50Us: [] },
  };
  try {
    for (let rep = 0; rep < reps; rep++) {
      for (const mode of ['read', 'write'] as const) {
        const { ops, seconds, latencies } = await runMode(locks, `doc:${rep}`, mode, loops, ms);
        runs[mode].opsPerSec.push(ops / seconds);
        runs[mode].p50Us.push(median(latencies));
        await sleep(50);
      }
    }
  } finally {
    await locks.close();
  }
  const summary = (mode: 'read' | 'write'): ReadLockRun => ({
    mode,
    opsPerSec: median(runs[mode].opsPerSec),
    p50Us: median(runs[mode].p50Us),
    runs: runs[mode].opsPerSec,
  });
  return { loops, ms, read: summary('read'), write: summary('write') };
}

/** One log line: both modes' ops/s and median latency, and how many times faster reads are. */
export function describeReadLock(r: ReadLockResult): string {
  const run = (x: ReadLockRun) =>
    `${x.mode} ${x.opsPerSec.toFixed(0)} ops/s (p50 ${(x.p50Us / 1_000).toFixed(2)} ms)`;
  const ratio = (r.read.opsPerSec / r.write.opsPerSec).toFixed(1);
  return `RW ${r.loops} loops on one key: ${run(r.read)}, ${run(r.write)}; reads ${ratio}×`;
}

/** The report's section on read locks: readers sharing one key, next to writers taking turns. */
export function renderReadLock(r: ReadLockResult): string[] {
  const row = (x: ReadLockRun, what: string): string =>
    `| ${what} | ${Math.round(x.opsPerSec).toLocaleString('en-US')} | ${(x.p50Us / 1_000).toFixed(2)} |`;
  return [
    `## RW — read locks, one key, ${r.loops} loops, ${r.ms / 1_000} s per run (medians of the repetitions)`,
    '',
    'No other Node library has a read-write lock: readers stand next to our exclusive lock on the same key. Readers share the key, so their round trips overlap; writers take turns, each woken by the previous release.',
    '',
    '| Mode | ops/s | acquire + release p50 (ms, waiting included) |',
    '| :-- | --: | --: |',
    row(r.read, "`mode: 'read'`"),
    row(r.write, "`mode: 'write'` (the exclusive lock)"),
    '',
    `Reads reach ${(r.read.opsPerSec / r.write.opsPerSec).toFixed(1)}× the writers' ops/s.`,
    '',
  ];
}
