// A/B check of two builds of the library (e.g. before and after a refactor), in one interleaved run:
//   NODE_PATH=node_modules node tools/compare-builds.js <dist A> <dist B> [reps]
// Per build: S1 (sequential acquire + release of fresh keys) and S2 (64 concurrent loops), on the
// Redis at REDIS_URL under a unique prefix, and Redis' own time per op (the usec INFO commandstats
// counts for the scripts the client sent: meaningful on a private server only). Prints medians per
// build and the B/A ratios per repetition, with the spread. Build each with
// `npx tsc -p tsconfig.build.json --outDir <dir>`.
// AB_KEYS=2 locks two keys per call (`acquire([a, b])`) instead of one.
// AB_ACQUIRE: JSON of the options of every acquire call, e.g. '{"mode":"read"}' (a reader's share)
// or '{"permits":3}' (a semaphore permit), to measure another lease kind.
// AB_OPTIONS_A / AB_OPTIONS_B: JSON of LockService options for one side, e.g. '{"fair":true}' — to
// compare two modes of one build (give the same dir twice).
'use strict';
const { performance } = require('node:perf_hooks');
const path = require('node:path');
const { commandStats, scriptCost } = require('./command-stats');

const [dirA, dirB, repsArg] = process.argv.slice(2);
if (!dirA || !dirB) {
  console.error('usage: node tools/compare-builds.js <dist A> <dist B> [reps]');
  process.exit(2);
}
const REPS = Number(repsArg ?? 5);
const redis = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const S1_OPS = 3_000;
const S2_MS = 1_500;
const S2_LOOPS = 64;
const KEYS = Number(process.env.AB_KEYS ?? 1);
/** What one call locks: `name`, or KEYS keys named after it. */
const target = (name) =>
  KEYS === 1 ? name : Array.from({ length: KEYS }, (_, i) => `${name}:${i}`);
const sideOptions = (name) => JSON.parse(process.env[name] || '{}');
const ACQUIRE = JSON.parse(process.env.AB_ACQUIRE || '{}');
const OPTIONS = [sideOptions('AB_OPTIONS_A'), sideOptions('AB_OPTIONS_B')];

async function s1(locks, tag) {
  const cpu = process.cpuUsage();
  const start = performance.now();
  for (let i = 0; i < S1_OPS; i++) {
    const lock = await locks.acquire(target(`${tag}:${i}`), ACQUIRE);
    await lock.release();
  }
  const ms = performance.now() - start;
  const used = process.cpuUsage(cpu);
  return { opsPerS: (S1_OPS / ms) * 1000, cpuUsPerOp: (used.user + used.system) / S1_OPS };
}

async function s2(locks, tag) {
  let ops = 0;
  const end = performance.now() + S2_MS;
  const loop = async (n) => {
    for (let i = 0; performance.now() < end; i++) {
      const lock = await locks.acquire(target(`${tag}:${n}:${i}`), ACQUIRE);
      await lock.release();
      ops++;
    }
  };
  const start = performance.now();
  await Promise.all(Array.from({ length: S2_LOOPS }, (_, n) => loop(n)));
  return { opsPerS: (ops / (performance.now() - start)) * 1000, ops };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const range = (xs, digits = 0) =>
  `${Math.min(...xs).toFixed(digits)}–${Math.max(...xs).toFixed(digits)}`;
const METRICS = [
  ['s1', 'S1 ops/s', 0],
  ['cpu', 'S1 client CPU µs/op', 1],
  ['s2', 'S2 ops/s', 0],
  ['redisUs', 'Redis µs/op (S1 and S2)', 2],
  ['inner', 'commands run in scripts/op', 1],
];

async function main() {
  const Redis = require('ioredis');
  const probe = new Redis(redis);
  const builds = [dirA, dirB].map((dir, i) => ({
    dir: `${dir}${process.env[i ? 'AB_OPTIONS_B' : 'AB_OPTIONS_A'] ? ` ${JSON.stringify(OPTIONS[i])}` : ''}`,
    options: OPTIONS[i],
    LockService: require(path.resolve(dir, 'index.js')).LockService,
    ...Object.fromEntries(METRICS.map(([key]) => [key, []])),
  }));
  const prefix = `ab:${process.pid}:`;
  for (let rep = 0; rep < REPS; rep++) {
    const order = rep % 2 === 0 ? builds : [...builds].reverse();
    for (const build of order) {
      // Keys of its own per side: a fence counter left by the other side would spare this one
      // the work of starting a new counter.
      const side = builds.indexOf(build);
      const locks = new build.LockService({ redis, prefix, startupCheck: 'off', ...build.options });
      await s1(locks, `warm:${rep}:${side}`); // connections and JIT
      const before = await commandStats(probe);
      const one = await s1(locks, `s1:${rep}:${side}`);
      const many = await s2(locks, `s2:${rep}:${side}`);
      const cost = scriptCost(before, await commandStats(probe), S1_OPS + many.ops);
      build.s1.push(one.opsPerS);
      build.cpu.push(one.cpuUsPerOp);
      build.s2.push(many.opsPerS);
      build.redisUs.push(cost.usec);
      build.inner.push(cost.inner);
      await locks.close();
    }
  }
  for (const b of builds) {
    console.log(
      `${b.dir}: ` +
        METRICS.map(
          ([key, name, digits]) =>
            `${name} ${median(b[key]).toFixed(digits)} (${range(b[key], digits)})`,
        ).join(', '),
    );
  }
  // Ratios within each repetition (both sides ran back to back), so a load change between
  // repetitions cancels out.
  const [a, b] = builds;
  console.log(
    `B/A per repetition, median (range): ` +
      METRICS.slice(0, 4)
        .map(([key, name]) => {
          const ratios = a[key].map((x, i) => b[key][i] / x);
          return `${name} ${median(ratios).toFixed(3)}× (${range(ratios, 3)})`;
        })
        .join(', ') +
      ` — ${REPS} interleaved repetitions`,
  );
  probe.disconnect();
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
