/**
 * `npm run bench:telemetry`: what the lifecycle events and the OpenTelemetry instrumentation cost,
 * on S1 (sequential acquire + release of a fresh key) and S2 (64 loops at once, each on its own
 * key), against a private redis-server (spawned on a free port, killed by pid at the end).
 *
 *   node -r ./tools/ts-register.js bench/telemetry.ts
 *
 * Four arms, one LockService each, run in turns (blocks of S1 operations, slices of S2 time) so
 * a load change on the machine hits all alike:
 *   off      telemetry code with nothing behind it: what runs when `@opentelemetry/api` is not
 *            installed (the engine's telemetry is emptied, as when the API cannot be loaded)
 *   off2     the same as `off`, a second time: its ratio to `off` is the bench's noise floor
 *   api      `@opentelemetry/api` installed, no SDK registered: the default for most apps
 *   sdk      an SDK registered while this arm runs: a MeterProvider with a reader (exporting
 *            every hour, so aggregation is measured, not export) and a TracerProvider whose
 *            batch processor hands spans to an exporter that drops them, with an
 *            AsyncLocalStorage context manager, as the Node SDK sets up
 * Ratios are against `off`, per repetition; the report gives their median and their range over
 * repetitions. `off2 / off` is the spread of two identical arms: an `api` ratio inside it is no
 * measurable cost.
 *
 * S1-mem repeats S1 on the in-memory backend, without Redis: the library's own CPU per acquire +
 * release, where the telemetry's share is not hidden by network round trips.
 *
 * Environment: TELEMETRY_REPS=5, TELEMETRY_S1_OPS=3000 (per arm and repetition),
 * TELEMETRY_MEM_OPS=20000 (S1-mem, per arm and repetition),
 * TELEMETRY_S2_MS=1500 (per arm and repetition), BENCH_REDIS_URL to use an existing Redis,
 * BENCH_OUT=path/stem (default bench/results/telemetry) for <stem>.json and <stem>.md.
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { LockService } from 'nestjs-redis-lock';
import { MemoryLockBackend } from '../lib/backends/memory.backend';
import { LockEngine } from '../lib/engine/lock-engine';
import { resolveOptions } from '../lib/options/resolve-options';
import { deleteKeys, startBenchRedis } from './lib/redis-server';
import { median, nowUs, percentile } from './lib/stats';
import { otelSdk } from './lib/otel-sdk';

const env = (name: string, fallback: number): number => {
  const value = Number(process.env[name] ?? fallback);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} must be a positive number`);
  return value;
};
const REPS = env('TELEMETRY_REPS', 5);
const S1_OPS = env('TELEMETRY_S1_OPS', 3_000);
const S2_MS = env('TELEMETRY_S2_MS', 1_500);
const S1_BLOCK = 250;
const S2_SLICE_MS = 500;
const S2_LOOPS = 64;
const ARMS = ['off', 'off2', 'api', 'sdk'] as const;
type Arm = (typeof ARMS)[number];
type Scenario = 's1' | 's2' | 'mem';
const MEM_OPS = env('TELEMETRY_MEM_OPS', 20_000);
const MEM_BLOCK = 2_000;
const PREFIX = 'bench:telemetry:';
const log = (message: string): void => void process.stderr.write(`[telemetry] ${message}\n`);

interface Numbers {
  opsPerSec: number;
  p50Us: number;
  p99Us: number;
  cpuUsPerOp: number;
}

async function main(): Promise<void> {
  const redis = await startBenchRedis();
  const sdk = otelSdk();
  const services = {} as Record<Arm, LockService>;
  for (const arm of ARMS) {
    services[arm] = new LockService({ redis: redis.url, prefix: `${PREFIX}${arm}:` });
  }
  // What the engine holds when `@opentelemetry/api` cannot be loaded: no metrics, no spans.
  for (const arm of ['off', 'off2'] as const) {
    (services[arm].engine.lifecycle as unknown as { telemetry: object }).telemetry = {};
  }
  /** Runs `fn` as `arm`: the SDK registered for `sdk` only. */
  const as = async <T>(arm: Arm, fn: () => Promise<T>): Promise<T> => {
    if (arm === 'sdk') sdk.register();
    try {
      return await fn();
    } finally {
      if (arm === 'sdk') sdk.unregister();
    }
  };
  const results: Record<Scenario, Record<Arm, Numbers[]>> = {
    s1: byArm(() => []),
    s2: byArm(() => []),
    mem: byArm(() => []),
  };
  const engines = byArm((arm) => memoryEngine(arm));
  try {
    for (const arm of ARMS) {
      await as(arm, async () => {
        for (let i = 0; i < 300; i++) await (await services[arm].acquire(`warm:${i}`)).release();
      });
    }
    for (let rep = 0; rep < REPS; rep++) {
      // Arms in a different order each repetition, so none always runs first.
      const order = ARMS.map((_, i) => ARMS[(i + rep) % ARMS.length]);
      const s1 = await s1Interleaved(order, services, as);
      const s2 = await s2Interleaved(order, services, as);
      const mem = await memInterleaved(order, engines, as);
      for (const arm of ARMS) {
        results.s1[arm].push(s1[arm]);
        results.s2[arm].push(s2[arm]);
        results.mem[arm].push(mem[arm]);
      }
      log(`rep ${rep + 1}/${REPS}: S1 ${line(s1)} | S2 ${line(s2)} | S1-mem ${line(mem)}`);
    }
  } finally {
    await Promise.allSettled(ARMS.map((arm) => services[arm].close()));
    await Promise.allSettled(ARMS.map((arm) => engines[arm].close()));
    await sdk.shutdown();
    await deleteKeys(redis.url, [`${PREFIX}*`]).catch(() => 0);
    await redis.stop();
  }
  const report = render(results);
  const out = process.env.BENCH_OUT ?? join(__dirname, 'results/telemetry');
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(`${out}.json`, JSON.stringify({ config: configLine(), results }, null, 2) + '\n');
  writeFileSync(`${out}.md`, report);
  process.stdout.write(report);
}

/** One value per arm. */
function byArm<T>(make: (arm: Arm) => T): Record<Arm, T> {
  return Object.fromEntries(ARMS.map((arm) => [arm, make(arm)])) as Record<Arm, T>;
}

const line = (numbers: Record<Arm, Numbers>): string =>
  ARMS.map((arm) => `${arm} ${Math.round(numbers[arm].opsPerSec)}/s`).join(', ');

/** S1, one repetition: `S1_OPS` acquire + release per arm, the arms taking turns every block. */
async function s1Interleaved(
  order: readonly Arm[],
  services: Record<Arm, LockService>,
  as: <T>(arm: Arm, fn: () => Promise<T>) => Promise<T>,
): Promise<Record<Arm, Numbers>> {
  const run = randomUUID().slice(0, 8);
  const latencies = byArm((): number[] => []);
  const elapsed = byArm(() => 0);
  const cpu = byArm(() => 0);
  for (let done = 0; done < S1_OPS; done += S1_BLOCK) {
    for (const arm of order) {
      await as(arm, async () => {
        const until = Math.min(S1_OPS, done + S1_BLOCK);
        const cpu0 = process.cpuUsage();
        const started = nowUs();
        for (let i = done; i < until; i++) {
          const t0 = nowUs();
          await (await services[arm].acquire(`s1:${run}:${i}`)).release();
          latencies[arm].push(nowUs() - t0);
        }
        elapsed[arm] += nowUs() - started;
        const used = process.cpuUsage(cpu0);
        cpu[arm] += used.user + used.system;
      });
    }
  }
  const of = (arm: Arm): Numbers => ({
    opsPerSec: S1_OPS / (elapsed[arm] / 1e6),
    p50Us: percentile(latencies[arm], 50),
    p99Us: percentile(latencies[arm], 99),
    cpuUsPerOp: cpu[arm] / S1_OPS,
  });
  return byArm(of);
}

/** S2, one repetition: 64 loops per arm for `S2_MS`, in slices the arms take in turns. */
async function s2Interleaved(
  order: readonly Arm[],
  services: Record<Arm, LockService>,
  as: <T>(arm: Arm, fn: () => Promise<T>) => Promise<T>,
): Promise<Record<Arm, Numbers>> {
  const run = randomUUID().slice(0, 8);
  const leadInUs = 50_000;
  const latencies = byArm((): number[] => []);
  const timed = byArm(() => 0);
  const cpu = byArm(() => 0);
  const ops = byArm(() => 0);
  for (let done = 0; done < S2_MS; done += S2_SLICE_MS) {
    const slice = Math.min(S2_SLICE_MS, S2_MS - done);
    for (const arm of order) {
      await as(arm, async () => {
        const start = nowUs() + leadInUs;
        const end = start + slice * 1_000;
        const cpu0 = process.cpuUsage();
        let count = 0;
        await Promise.all(
          Array.from({ length: S2_LOOPS }, async (_, loop) => {
            for (;;) {
              const t0 = nowUs();
              if (t0 >= end) return;
              await (await services[arm].acquire(`s2:${run}:${loop}`)).release();
              const t1 = nowUs();
              count++;
              if (t0 >= start && t1 <= end) latencies[arm].push(t1 - t0);
            }
          }),
        );
        const used = process.cpuUsage(cpu0);
        cpu[arm] += used.user + used.system;
        ops[arm] += count;
        timed[arm] += slice * 1_000;
      });
    }
  }
  const of = (arm: Arm): Numbers => ({
    opsPerSec: latencies[arm].length / (timed[arm] / 1e6),
    p50Us: percentile(latencies[arm], 50),
    p99Us: percentile(latencies[arm], 99),
    cpuUsPerOp: cpu[arm] / ops[arm],
  });
  return byArm(of);
}

function configLine(): string {
  return (
    `${REPS} repetitions; S1 ${S1_OPS} ops per arm and repetition (blocks of ${S1_BLOCK}); ` +
    `S2 ${S2_LOOPS} loops, ${S2_MS} ms per arm and repetition (slices of ${S2_SLICE_MS} ms); ` +
    `S1-mem ${MEM_OPS} ops per arm and repetition (blocks of ${MEM_BLOCK}); ` +
    `Node ${process.version}, ${cpus().length} CPUs, load ${loadavg()[0].toFixed(2)}`
  );
}

/** Median and range over repetitions of `arm / off` for one field (a ratio per repetition). */
function ratio(runs: Record<Arm, Numbers[]>, arm: Arm, field: keyof Numbers): string {
  const ratios = runs[arm].map((numbers, i) => numbers[field] / runs.off[i][field]);
  const fmt = (value: number): string => value.toFixed(3);
  return `${fmt(median(ratios))} (${fmt(Math.min(...ratios))}–${fmt(Math.max(...ratios))})`;
}

/**
 * S1 on the in-memory backend (no Redis, no network): the library's own CPU per acquire +
 * release, where the telemetry's share is not hidden by round trips. Internal API: the engine
 * is given the backend directly.
 */
function memoryEngine(arm: Arm): LockEngine {
  const engine = new LockEngine(
    resolveOptions({ startupCheck: 'off', prefix: `${PREFIX}${arm}:` }),
    {
      backend: new MemoryLockBackend(),
    },
  );
  if (arm === 'off' || arm === 'off2') {
    (engine.lifecycle as unknown as { telemetry: object }).telemetry = {};
  }
  return engine;
}

async function memInterleaved(
  order: readonly Arm[],
  engines: Record<Arm, LockEngine>,
  as: <T>(arm: Arm, fn: () => Promise<T>) => Promise<T>,
): Promise<Record<Arm, Numbers>> {
  const run = randomUUID().slice(0, 8);
  const elapsed = byArm(() => 0);
  const cpu = byArm(() => 0);
  const request = { ttl: 30_000, wait: 0, maxHold: Infinity, renew: true };
  for (let done = 0; done < MEM_OPS; done += MEM_BLOCK) {
    for (const arm of order) {
      await as(arm, async () => {
        const cpu0 = process.cpuUsage();
        const started = nowUs();
        for (let i = done; i < done + MEM_BLOCK; i++) {
          const outcome = await engines[arm].acquire({ ...request, key: `mem:${run}:${i}` });
          if (!('lock' in outcome)) throw new Error('S1-mem: a fresh key was busy');
          await outcome.lock.release();
        }
        elapsed[arm] += nowUs() - started;
        const used = process.cpuUsage(cpu0);
        cpu[arm] += used.user + used.system;
      });
    }
  }
  return byArm((arm) => ({
    opsPerSec: MEM_OPS / (elapsed[arm] / 1e6),
    p50Us: NaN,
    p99Us: NaN,
    cpuUsPerOp: cpu[arm] / MEM_OPS,
  }));
}

const SCENARIO_NAMES: Record<Scenario, string> = { s1: 'S1', s2: 'S2', mem: 'S1-mem' };

function render(results: Record<Scenario, Record<Arm, Numbers[]>>): string {
  const rows: string[] = [];
  const fields = ['opsPerSec', 'p50Us', 'p99Us', 'cpuUsPerOp'] as const;
  for (const scenario of ['s1', 's2', 'mem'] as const) {
    const runs = results[scenario];
    for (const arm of ARMS) {
      const med = (field: keyof Numbers): number => median(runs[arm].map((n) => n[field]));
      const shown = (field: keyof Numbers, digits = 0): string =>
        Number.isNaN(med(field)) ? '–' : med(field).toFixed(digits);
      const cells = fields.map((field) =>
        Number.isNaN(med(field)) ? '–' : arm === 'off' ? '1' : ratio(runs, arm, field),
      );
      rows.push(
        `| ${SCENARIO_NAMES[scenario]} | ${arm} | ${shown('opsPerSec')} | ${shown('p50Us')} | ` +
          `${shown('p99Us')} | ${shown('cpuUsPerOp', 1)} | ${cells.join(' | ')} |`,
      );
    }
  }
  return [
    '# Telemetry cost (S1, S2, S1 on the in-memory backend)',
    '',
    configLine(),
    '',
    'Medians over repetitions; ratios are `arm / off` per repetition: median (min–max).',
    '',
    '| scenario | arm | ops/s | p50 µs | p99 µs | CPU µs/op | ops/s ratio | p50 ratio | p99 ratio | CPU/op ratio |',
    '| --- | --- | --: | --: | --: | --: | --: | --: | --: | --: |',
    ...rows,
    '',
  ].join('\n');
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
