/**
 * Multi-key locks: what holding two keys together costs next to one key, and next to the raw
 * floor (bare Redis commands, no library). Each case does acquire + release of fresh keys:
 * sequentially (round-trip bound), then from 64 concurrent loops (throughput bound). Cases take
 * turns in blocks, so a load change on the machine hits all alike.
 *
 * - raw, 1 key: `SET NX PX` + compare-and-delete script (the single-key floor);
 * - raw, 2 keys: one script sets both or neither, one script deletes both (the multi-key floor);
 * - ours, 1 key: `acquire(key)`;
 * - ours, 2 keys: `acquire([a, b])`, one script per try (one Redis);
 * - ours fair, 2 keys: fair mode, keys taken one by one in lock order (the Cluster/Redlock path).
 */
import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';
import { LockService } from 'nestjs-redis-lock';
import { median, percentile, nowUs } from './stats';

export interface MultiKeyRow {
  case: string;
  keys: 1 | 2;
  /** The raw floor (bare Redis commands), the row ours stand next to. */
  raw: boolean;
  sequentialOpsPerSec: number;
  p50Us: number;
  p99Us: number;
  parallelOpsPerSec: number;
  /** Each repetition's figures (the row's are their medians); absent in single-run results. */
  runs?: { sequentialOpsPerSec: number; parallelOpsPerSec: number }[];
}

export interface MultiKeyConfig {
  /** Sequential acquire + release per case. */
  ops: number;
  /** Duration of each case's parallel run. */
  parallelMs: number;
  loops: number;
  /** Interleaved repetitions (each starts with another case); 1 in runs before they were kept. */
  reps?: number;
}

interface Case {
  name: string;
  keys: 1 | 2;
  raw: boolean;
  /** Acquires the fresh key(s) named from `id` and releases them. */
  cycle(id: string): Promise<unknown>;
  close(): Promise<unknown>;
}

const TTL = 30_000;
const DEL_IF_EQUAL = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`;
const SET_ALL = `for i = 1, #KEYS do if redis.call('EXISTS', KEYS[i]) == 1 then return 0 end end
for i = 1, #KEYS do redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2]) end return 1`;
const DEL_ALL = `local n = 0 for i = 1, #KEYS do if redis.call('GET', KEYS[i]) == ARGV[1] then n = n + redis.call('DEL', KEYS[i]) end end return n`;

async function rawCase(url: string, keys: 1 | 2): Promise<Case> {
  const client = new Redis(url);
  client.on('error', () => undefined);
  const [del, setAll, delAll] = await Promise.all(
    [DEL_IF_EQUAL, SET_ALL, DEL_ALL].map((lua) => client.script('LOAD', lua) as Promise<string>),
  );
  return {
    name: `raw ioredis (floor), ${keys} key${keys > 1 ? 's' : ''}`,
    keys,
    raw: true,
    async cycle(id) {
      const token = randomUUID();
      if (keys === 1) {
        const key = `bench:mk:raw:${id}`;
        if ((await client.set(key, token, 'PX', TTL, 'NX')) !== 'OK') throw new Error('busy');
        return client.evalsha(del, 1, key, token);
      }
      const [a, b] = [`bench:mk:raw:{${id}}:a`, `bench:mk:raw:{${id}}:b`];
      if ((await client.evalsha(setAll, 2, a, b, token, TTL)) !== 1) throw new Error('busy');
      return client.evalsha(delAll, 2, a, b, token);
    },
    close: () => client.quit(),
  };
}

async function oursCase(url: string, keys: 1 | 2, fair: boolean): Promise<Case> {
  const locks = new LockService({
    redis: url,
    prefix: `bench:mk:ours${fair ? '-fair' : ''}:`,
    fair,
  });
  await (await locks.acquire(`warmup:${randomUUID()}`)).release();
  return {
    name: `nestjs-redis-lock${fair ? ' (fair: keys one by one)' : ''}, ${keys} key${keys > 1 ? 's' : ''}`,
    keys,
    raw: false,
    async cycle(id) {
      const held =
        keys === 1 ? await locks.acquire(id) : await locks.acquire([`${id}:a`, `${id}:b`]);
      return held.release();
    },
    close: () => locks.close(),
  };
}

export interface MultiKeyResult extends MultiKeyConfig {
  rows: MultiKeyRow[];
}

/** Runs every case; resolves one row per case, and logs the report's table. */
export async function runMultiKey(
  url: string,
  config: MultiKeyConfig,
  log: (line: string) => void,
): Promise<MultiKeyResult> {
  const cases = [
    await rawCase(url, 1),
    await rawCase(url, 2),
    await oursCase(url, 1, false),
    await oursCase(url, 2, false),
    await oursCase(url, 2, true),
  ];
  const run = randomUUID().slice(0, 8);
  const reps = config.reps ?? 1;
  try {
    const latencies = cases.map((): number[] => []);
    const runs = cases.map((): { sequentialOpsPerSec: number; parallelOpsPerSec: number }[] => []);
    const block = 100;
    for (let rep = 0; rep < reps; rep++) {
      // Each repetition starts with another case, so none always follows the same one.
      const order = cases.map((_, i) => (i + rep) % cases.length);
      const elapsed = cases.map(() => 0);
      for (let done = 0; done < config.ops; done += block) {
        for (const c of order) {
          const started = nowUs();
          for (let i = done; i < Math.min(config.ops, done + block); i++) {
            const t0 = nowUs();
            await cases[c].cycle(`s:${run}:${rep}:${c}:${i}`);
            latencies[c].push(nowUs() - t0);
          }
          elapsed[c] += nowUs() - started;
        }
      }
      const parallel = cases.map(() => 0);
      for (const c of order) {
        let count = 0;
        const until = nowUs() + config.parallelMs * 1_000;
        const started = nowUs();
        await Promise.all(
          Array.from({ length: config.loops }, async (_, loop) => {
            for (let i = 0; nowUs() < until; i++) {
              await cases[c].cycle(`p:${run}:${rep}:${c}:${loop}:${i}`);
              count++;
            }
          }),
        );
        parallel[c] = count / ((nowUs() - started) / 1e6);
      }
      cases.forEach((_, c) =>
        runs[c].push({
          sequentialOpsPerSec: config.ops / (elapsed[c] / 1e6),
          parallelOpsPerSec: parallel[c],
        }),
      );
      log(
        `MK rep ${rep + 1}: ${cases.map((one, c) => `${one.name} ${runs[c][rep].sequentialOpsPerSec.toFixed(0)}`).join(', ')} sequential ops/s`,
      );
    }
    const rows = cases.map((one, c) => ({
      case: one.name,
      keys: one.keys,
      raw: one.raw,
      sequentialOpsPerSec: median(runs[c].map((x) => x.sequentialOpsPerSec)),
      p50Us: percentile(latencies[c], 50),
      p99Us: percentile(latencies[c], 99),
      parallelOpsPerSec: median(runs[c].map((x) => x.parallelOpsPerSec)),
      runs: runs[c],
    }));
    const result = { ...config, rows };
    for (const line of renderMultiKey(result)) if (line.startsWith('|')) log(line);
    return result;
  } finally {
    await Promise.allSettled(cases.map((one) => one.close()));
  }
}

/** The report's section on multi-key locks: each case next to the floor with as many keys. */
export function renderMultiKey(r: MultiKeyResult): string[] {
  const n0 = (v: number): string => Math.round(v).toLocaleString('en-US');
  const floor = (keys: number): MultiKeyRow | undefined =>
    r.rows.find((row) => row.raw && row.keys === keys);
  const rows = r.rows.map((row) => {
    const raw = floor(row.keys);
    const vs = (mine: number, theirs: number | undefined): string =>
      theirs ? `${(mine / theirs).toFixed(2)}×` : '—';
    return `| ${row.case} | ${n0(row.sequentialOpsPerSec)} | ${vs(row.sequentialOpsPerSec, raw?.sequentialOpsPerSec)} | ${n0(row.p50Us)} | ${n0(row.p99Us)} | ${n0(row.parallelOpsPerSec)} | ${vs(row.parallelOpsPerSec, raw?.parallelOpsPerSec)} |`;
  });
  return [
    `## MK — multi-key locks (${n0(r.ops)} sequential acquire + release per case, then ${r.loops} loops × ${r.parallelMs / 1_000} s; ${(r.reps ?? 1) > 1 ? `medians of ${r.reps} interleaved repetitions` : 'one run'}; the sequential cases take turns in blocks of 100)`,
    '',
    'No other Node library locks several keys at once: each case stands next to the raw floor with as many keys (bare `SET NX PX` / one script setting both keys, and a compare-and-delete script).',
    '',
    `| Case | sequential ops/s | vs raw, same keys | p50 µs | p99 µs | ${r.loops}-parallel ops/s | vs raw, same keys |`,
    '| :-- | --: | --: | --: | --: | --: | --: |',
    ...rows,
    '',
  ];
}
