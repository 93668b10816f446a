/**
 * `npm run bench`: nestjs-redis-lock against the libraries users would pick instead, in one run
 * on one private redis-server (spawned here on a free port, killed by pid at the end).
 *
 *   node --expose-gc -r ./tools/ts-register.js bench/run.ts
 *
 * Environment (defaults keep a full run under ~10 min on 2 cores):
 *   BENCH_REPS=3          interleaved repetitions (medians reported; counts summed)
 *   BENCH_S1_OPS=5000     S1 sequential acquire+release per repetition
 *   BENCH_S2_MS=3000      S2 duration per repetition (64 loops)
 *   BENCH_S3_MS=2000      S3/S3P duration per run
 *   BENCH_S5_SEQ=2000     S5 sequential requests per route; BENCH_S5_CONC=8000 concurrent
 *   BENCH_S6_CYCLES=200000  S6 acquire/release cycles (1000000 for the published run)
 *   BENCH_S6_HELD=10000   S6 locks held at once; BENCH_S6_TTL=900 their lease (ms)
 *   BENCH_S6_WAITERS=1000 S6 callers waiting at once, for the bytes per waiter
 *   BENCH_MK_OPS=2000     multi-key sequential acquire+release per case; BENCH_MK_MS=2000 parallel run
 *   BENCH_SEM_MS=2000     SEM (semaphore, bench/lib/semaphore.ts) duration per run
 *   BENCH_ONLY=s1,s3      run a subset (then results go to a temp dir unless BENCH_OUT is set);
 *                         rw: read-lock throughput next to the exclusive lock;
 *                         s6mem: only S6's bytes per held lock and per waiter (no cycles)
 *   BENCH_CONTENDERS=ours,raw,redis-semaphore:tuned   run a subset of libraries (same rule)
 *   BENCH_OUT=path/stem   where to write <stem>.json/.md/-s3p-wait.svg (default bench/results/latest)
 *   BENCH_DUMP_DIR=dir    keep the raw S3 hold records of every run there
 *   BENCH_REDIS_URL=...   use an existing Redis instead (its stats are only read, never reset)
 *   BENCH_BASELINE=path   the published results JSON whose read-lock and permit figures this run
 *                         must reach (default bench/results/latest.json, read before it is rewritten)
 */
import { fork, execSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync, mkdtempSync } from 'node:fs';
import { cpus, loadavg, release, totalmem, tmpdir, type as osType } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { readBaseline } from './lib/baseline';
import { CONTENDERS as ALL_CONTENDERS, label, type Contender } from './lib/contenders';
import {
  analyze,
  runWorker,
  type ContendedMetrics,
  type ContendedPlan,
  type HoldRecord,
} from './lib/contended';
import { s5Once, type S5Metrics } from './lib/decorator';
import { s6Footprint } from './lib/footprint';
import { s6Cycles, s6Held } from './lib/memory';
import { runMultiKey } from './lib/multi-key';
import { runSemaphoreBench } from './lib/semaphore';
import { describeReadLock, readLockScenario } from './lib/read-lock';
import { deleteKeys, startBenchRedis, type BenchRedis } from './lib/redis-server';
import { render, type Results, type S3Cell } from './lib/report';
import { combine, nowUs } from './lib/stats';
import {
  s1Interleaved,
  s1RoundTrips,
  s2Interleaved,
  type S1Metrics,
  type S2Metrics,
} from './lib/uncontended';

const env = (name: string, fallback: number): number => {
  const value = process.env[name];
  if (value === undefined || value === '') return fallback;
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0)
    throw new Error(`${name} must be a positive number, got "${value}"`);
  return n;
};

const config = {
  reps: env('BENCH_REPS', 3),
  s1Ops: env('BENCH_S1_OPS', 5_000),
  s2Ms: env('BENCH_S2_MS', 3_000),
  s2Loops: 64,
  s3Ms: env('BENCH_S3_MS', 2_000),
  s3Workers: 8,
  criticalMs: 1,
  pauseMs: 5,
  s5Sequential: env('BENCH_S5_SEQ', 2_000),
  s5Concurrent: env('BENCH_S5_CONC', 8_000),
  s6Cycles: env('BENCH_S6_CYCLES', 200_000),
  s6Held: env('BENCH_S6_HELD', 10_000),
  s6TtlMs: env('BENCH_S6_TTL', 900),
  s6Waiters: env('BENCH_S6_WAITERS', 1_000),
  semMs: env('BENCH_SEM_MS', 2_000),
};
const only = process.env.BENCH_ONLY?.split(',').map((s) => s.trim().toLowerCase());
const pick = process.env.BENCH_CONTENDERS?.split(',').map((s) => s.trim());
const CONTENDERS = pick ? ALL_CONTENDERS.filter((c) => pick.includes(c.id)) : ALL_CONTENDERS;
/** Contended scenarios: mutexes only (readers and permit holders share a key by design). */
const CONTENDED = CONTENDERS.filter((c) => c.variant !== 'kind');
const wants = (scenario: string): boolean => !only || only.includes(scenario);

const root = join(__dirname, '..');
const log = (message: string): void => void process.stderr.write(`[bench] ${message}\n`);

/**
 * Uncontended scenarios: retry settings do not matter there, so peers run at defaults only. Ours
 * runs in fair mode too: what fair mode costs when nobody waits is a figure of its own; and as a
 * read lock and a permit, for those kinds' S1/S2 figures.
 */
const UNCONTENDED = CONTENDERS.filter((c) => c.variant !== 'tuned' || c.id === 'ours:fair');

/** Interleaving: each repetition starts with a different contender. */
const rotate = <T>(list: T[], by: number): T[] => list.map((_, i) => list[(i + by) % list.length]);

// --- S3P worker processes -------------------------------------------------------------------

class WorkerProcess {
  readonly child: ChildProcess;
  private readonly inbox: { type: string; [k: string]: unknown }[] = [];
  private waiting?: (message: { type: string; [k: string]: unknown }) => void;

  constructor() {
    this.child = fork(join(__dirname, 's3-worker.ts'), [], {
      execArgv: ['-r', join(root, 'tools/ts-register.js')],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    this.child.on('message', (message: { type: string }) => {
      if (this.waiting) {
        const resolve = this.waiting;
        this.waiting = undefined;
        resolve(message);
      } else this.inbox.push(message);
    });
  }

  async ask<T = Record<string, unknown>>(message: object, expect: string): Promise<T> {
    this.child.send(message);
    const reply =
      this.inbox.shift() ??
      (await new Promise<{ type: string; [k: string]: unknown }>((r) => (this.waiting = r)));
    if (reply.type !== expect)
      throw new Error(
        `S3P worker ${this.child.pid}: expected ${expect}, got ${JSON.stringify(reply).slice(0, 500)}`,
      );
    return reply as T;
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise((resolve) => this.child.once('exit', resolve));
    try {
      this.child.send({ type: 'exit' });
    } catch {
      // already disconnected
    }
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
  }
}

// --- scenarios ------------------------------------------------------------------------------

async function runS1(url: string): Promise<Results['s1']> {
  const out: NonNullable<Results['s1']> = {};
  const runs: Record<string, S1Metrics[]> = {};
  for (let rep = 0; rep < config.reps; rep++) {
    const order = rotate(UNCONTENDED, rep);
    const metrics = await s1Interleaved(order, url, config.s1Ops);
    order.forEach((c, i) => (runs[c.id] ??= []).push(metrics[i]));
    log(
      `S1 rep ${rep + 1}: ${order.map((c, i) => `${label(c)} ${metrics[i].opsPerSec.toFixed(0)}`).join(', ')} ops/s`,
    );
  }
  for (const c of UNCONTENDED) {
    const rt = await s1RoundTrips(c, url);
    out[c.id] = { runs: runs[c.id], median: combine(runs[c.id]), roundTrips: rt };
    log(
      `S1 commands ${label(c)}: sent ${rt.perOp.toFixed(2)} ${JSON.stringify(rt.byCommand)}, ` +
        `in Lua ${rt.luaPerOp?.toFixed(2)} ${JSON.stringify(rt.luaByCommand)}`,
    );
  }
  return out;
}

async function runS2(url: string): Promise<Results['s2']> {
  const runs: Record<string, S2Metrics[]> = {};
  for (let rep = 0; rep < config.reps; rep++) {
    const order = rotate(UNCONTENDED, rep);
    const metrics = await s2Interleaved(order, url, config.s2Loops, config.s2Ms);
    order.forEach((c, i) => (runs[c.id] ??= []).push(metrics[i]));
    log(
      `S2 rep ${rep + 1}: ${order.map((c, i) => `${label(c)} ${metrics[i].opsPerSec.toFixed(0)}`).join(', ')} ops/s`,
    );
  }
  const out: NonNullable<Results['s2']> = {};
  for (const c of UNCONTENDED) out[c.id] = { runs: runs[c.id], median: combine(runs[c.id]) };
  return out;
}

function plan(tag: string, pauseMs: number): ContendedPlan {
  const startAt = nowUs() + 150_000;
  return {
    key: `s3:${tag}:${Math.random().toString(36).slice(2, 8)}`,
    startAt,
    endAt: startAt + config.s3Ms * 1_000,
    criticalMs: config.criticalMs,
    pauseMs,
  };
}

/** BENCH_DUMP_DIR: keep every S3 run's raw hold records (for digging into a number). */
function dump(name: string, records: HoldRecord[], p: ContendedPlan): void {
  const dir = process.env.BENCH_DUMP_DIR;
  if (!dir) return;
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, `${name.replace(/[^\w.-]/g, '_')}-${Date.now()}.json`),
    JSON.stringify({ plan: p, records }),
  );
}

async function s3InProcess(c: Contender, url: string, pauseMs: number) {
  const session = await c.open(url);
  try {
    const p = plan(`in:${c.id}`, pauseMs);
    const records: HoldRecord[] = [];
    const errors: string[] = [];
    await Promise.all(
      Array.from({ length: config.s3Workers }, (_, w) => runWorker(session, w, p, records, errors)),
    );
    dump(`inproc-${c.id}-pause${pauseMs}`, records, p);
    return { metrics: analyze(records, p, config.s3Workers), errors };
  } finally {
    await session.close();
  }
}

async function s3Processes(workers: WorkerProcess[], c: Contender, url: string, pauseMs: number) {
  await Promise.all(workers.map((w) => w.ask({ type: 'open', contender: c.id, url }, 'opened')));
  try {
    const p = plan(`procs:${c.id}`, pauseMs);
    const done = await Promise.all(
      workers.map((w, i) =>
        w.ask<{ records: HoldRecord[]; errors: string[] }>(
          { type: 'go', worker: i, plan: p },
          'done',
        ),
      ),
    );
    const records = done.flatMap((d) => d.records);
    dump(`procs-${c.id}-pause${pauseMs}`, records, p);
    return {
      metrics: analyze(records, p, workers.length),
      errors: done.flatMap((d) => d.errors),
    };
  } finally {
    await Promise.all(workers.map((w) => w.ask({ type: 'close' }, 'closed')));
  }
}

async function runS3(url: string, workers: WorkerProcess[]): Promise<Results['s3']> {
  type Mode = 'inproc' | 'procs';
  const raw: Record<
    Mode,
    Record<string, Record<string, { runs: ContendedMetrics[]; errors: string[] }>>
  > = {
    inproc: {},
    procs: {},
  };
  for (let rep = 0; rep < config.reps; rep++) {
    for (const pause of [config.pauseMs, 0]) {
      for (const mode of ['procs', 'inproc'] as Mode[]) {
        for (const c of rotate(CONTENDED, rep)) {
          const { metrics, errors } =
            mode === 'inproc'
              ? await s3InProcess(c, url, pause)
              : await s3Processes(workers, c, url, pause);
          const cell = ((raw[mode][String(pause)] ??= {})[c.id] ??= { runs: [], errors: [] });
          cell.runs.push(metrics);
          for (const e of errors)
            if (cell.errors.length < 3 && !cell.errors.includes(e)) cell.errors.push(e);
          log(
            `S3${mode === 'procs' ? 'P' : ' '} rep ${rep + 1} pause ${pause} ${label(c)}: ` +
              `${metrics.sectionsPerSec.toFixed(0)} cs/s, gap p50 ${metrics.gapP50.toFixed(2)} ms, ` +
              `wait p99 ${metrics.waitP99.toFixed(1)} ms, cross ${(metrics.crossShare * 100).toFixed(0)}%, ` +
              `violations ${metrics.violations}`,
          );
        }
      }
    }
  }
  const out = { inproc: {}, procs: {} } as NonNullable<Results['s3']>;
  for (const mode of ['inproc', 'procs'] as Mode[]) {
    for (const [pause, byId] of Object.entries(raw[mode])) {
      const cells: Record<string, S3Cell> = {};
      for (const [id, { runs, errors }] of Object.entries(byId)) {
        cells[id] = {
          runs,
          median: combine(runs, ['waitsOver1s', 'violations', 'giveUps', 'sections'], ['waitMax']),
          errors,
        };
      }
      out[mode][pause] = cells;
    }
  }
  return out;
}

async function runS5(url: string): Promise<Results['s5']> {
  const runs: S5Metrics[] = [];
  for (let rep = 0; rep < config.reps; rep++) {
    const m = await s5Once(url, config.s5Sequential, config.s5Concurrent);
    runs.push(m);
    log(
      `S5 rep ${rep + 1}: @Locked CPU ${m.seqLockedVsWithLockCpu.toFixed(2)}× the withLock route's ` +
        `(${m.seqLockedVsInterceptedCpu.toFixed(2)}× behind a pass-through interceptor) ` +
        `(16 concurrent ${m.concLockedVsWithLockCpu.toFixed(2)}×), req/s at 16 concurrent ` +
        `${m.concLockedVsWithLock.toFixed(2)}× the withLock route's; ` +
        `+${m.seqOverFloorP50Us.toFixed(0)} µs over the floor route ` +
        `(${m.seqOverFloorHandlerRtt.toFixed(2)} handler RTT of ${m.handlerRttUs.toFixed(0)} µs), ` +
        `+${(m.seqLockedCpuUs - m.seqFloorCpuUs).toFixed(0)} CPU µs/request; 16 concurrent ` +
        `${m.concLockedRps.toFixed(0)} vs ${m.concFloorRps.toFixed(0)} req/s (${m.concLockedVsFloor.toFixed(2)}×, ` +
        `CPU ${m.concLockedVsFloorCpu.toFixed(2)}×); ` +
        `PING ${m.rttUs.toFixed(0)} µs, lock op ${m.lockOpUs.toFixed(0)} µs`,
    );
  }
  return { runs, median: combine(runs, ['non200']) };
}

async function runS6(url: string): Promise<Results['s6']> {
  log(`S6 ${config.s6Cycles} acquire/release cycles…`);
  const cycles = await s6Cycles(url, config.s6Cycles);
  log(
    `S6 cycles: ${cycles.seconds.toFixed(1)} s, heap ${cycles.heapBeforeMb.toFixed(2)} → ${cycles.heapAfterMb.toFixed(2)} MB, ` +
      `slope ${cycles.slopeKbPer100k.toFixed(1)} KB/100k`,
  );
  await deleteKeys(url, ['bench:s6:*']);
  log(`S6 ${config.s6Held} locks held with ttl ${config.s6TtlMs} ms…`);
  const held = await s6Held(url, config.s6Held, config.s6TtlMs);
  log(
    `S6 held: ${held.renewalCommands} renewal commands (${held.renewalCommandsPerPeriod.toFixed(1)} per period) ` +
      `in ${held.renewalBursts} bursts; timers live max ${held.liveTimersMax}, active Timeout max ${held.activeTimeoutsMax}`,
  );
  return { cycles, held };
}

// --- main -----------------------------------------------------------------------------------

function versionOf(pkg: string, from = __dirname): string {
  try {
    const path = require.resolve(`${pkg}/package.json`, { paths: [from] });
    return (JSON.parse(readFileSync(path, 'utf8')) as { version: string }).version;
  } catch {
    // Some packages do not export package.json; find it next to the entry point.
    let dir = dirname(require.resolve(pkg, { paths: [from] }));
    for (let i = 0; i < 5; i++, dir = dirname(dir)) {
      try {
        const parsed = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as {
          name?: string;
          version: string;
        };
        if (parsed.name === pkg) return parsed.version;
      } catch {
        // keep looking
      }
    }
    return 'unknown';
  }
}

function git(command: string): string {
  try {
    return execSync(`git ${command}`, {
      cwd: root,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
  } catch {
    return 'unknown';
  }
}

async function main(): Promise<void> {
  const began = nowUs();
  let redis: BenchRedis | undefined;
  const workers: WorkerProcess[] = [];
  const stopAll = async (): Promise<void> => {
    await Promise.all(workers.map((w) => w.stop()));
    await redis?.stop();
  };
  process.once('SIGINT', () => void stopAll().then(() => process.exit(130)));
  process.once('SIGTERM', () => void stopAll().then(() => process.exit(143)));

  const results: Results = {
    meta: {
      date: new Date().toISOString(),
      commit: git('rev-parse --short HEAD'),
      libDirty: git('status --porcelain -- lib') !== '',
      node: process.version,
      os: `${osType()} ${release()}`,
      cpu: `${cpus()[0]?.model ?? 'unknown'} × ${cpus().length}`,
      memoryGb: Math.round(totalmem() / 2 ** 30),
      loadAverage: loadavg().map((v) => Math.round(v * 100) / 100),
      loadAverageEnd: [],
      redis: '',
      redisOwned: true,
      versions: {
        'nestjs-redis-lock': versionOf('nestjs-redis-lock', root),
        ioredis: versionOf('ioredis'),
        '@sesamecare-oss/redlock': versionOf('@sesamecare-oss/redlock'),
        redlock: versionOf('redlock'),
        'redis-semaphore': versionOf('redis-semaphore'),
        'redlock-universal': versionOf('redlock-universal'),
        '@nestjs/core': versionOf('@nestjs/core', root),
      },
      config,
      only: only ?? null,
      contenders: pick ?? null,
      seconds: 0,
    },
    contenders: CONTENDERS.map((c) => ({
      id: c.id,
      label: label(c),
      library: c.library,
      variant: c.variant,
      settings: c.settings,
    })),
  };

  const baselinePath = process.env.BENCH_BASELINE ?? join(__dirname, 'results/latest.json');
  results.baseline = readBaseline(baselinePath, root);
  if (results.baseline)
    log(`judging read locks and permits against ${baselinePath} (${results.baseline.date})`);

  try {
    redis = await startBenchRedis();
    results.meta.redis = redis.version;
    results.meta.redisOwned = redis.owned;
    log(`redis ${redis.version} at ${redis.url} (${redis.owned ? 'own process' : 'external'})`);
    if (loadavg()[0] > cpus().length) {
      log(
        `warning: load average ${loadavg()[0].toFixed(1)} on ${cpus().length} CPUs — other work competes; numbers will be noisy`,
      );
    }
    const { url } = redis;

    if (wants('s1')) results.s1 = await runS1(url);
    if (wants('s2')) results.s2 = await runS2(url);
    if (wants('s3') || wants('s3p')) {
      for (let i = 0; i < config.s3Workers; i++) workers.push(new WorkerProcess());
      results.s3 = await runS3(url, workers);
      await Promise.all(workers.map((w) => w.stop()));
    }
    if (wants('s5')) results.s5 = await runS5(url);
    if (wants('s6')) results.s6 = await runS6(url);
    if (wants('s6') || wants('s6mem')) {
      await deleteKeys(url, ['bench:s6held:*']);
      log(`S6 bytes per held lock (${config.s6Held}) and per waiter (${config.s6Waiters})…`);
      results.footprint = await s6Footprint(url, config.s6Held, config.s6Waiters, log);
    }
    if (wants('multikey')) {
      const mk = {
        ops: env('BENCH_MK_OPS', 2_000),
        parallelMs: env('BENCH_MK_MS', 2_000),
        loops: 64,
        reps: config.reps,
      };
      results.multiKey = await runMultiKey(url, mk, log);
    }
    if (wants('sem')) results.sem = await runSemaphoreBench(url, config.reps, log);
    if (wants('rw')) {
      results.rw = await readLockScenario(url, config.s2Ms, config.reps);
      log(describeReadLock(results.rw));
    }

    const deleted = await deleteKeys(url, ['bench:*', 'mutex:bench:*']);
    log(`cleaned ${deleted} bench keys`);
  } finally {
    await stopAll();
  }
  results.meta.seconds = (nowUs() - began) / 1e6;
  results.meta.loadAverageEnd = loadavg().map((v) => Math.round(v * 100) / 100);

  const stem =
    process.env.BENCH_OUT ??
    (only || pick
      ? join(mkdtempSync(join(tmpdir(), 'bench-')), 'partial')
      : join(__dirname, 'results/latest'));
  mkdirSync(dirname(stem), { recursive: true });
  const svgPath = `${stem}-s3p-wait.svg`;
  const { markdown, svg } = render(results, relative(dirname(stem), svgPath));
  writeFileSync(`${stem}.json`, `${JSON.stringify(results, null, 2)}\n`);
  writeFileSync(`${stem}.md`, markdown);
  if (svg) writeFileSync(svgPath, svg);
  process.stdout.write(`${markdown}\n`);
  log(
    `wrote ${stem}.json, ${stem}.md${svg ? `, ${svgPath}` : ''} in ${results.meta.seconds.toFixed(0)} s`,
  );
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
