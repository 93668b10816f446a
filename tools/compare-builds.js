// A/B check of two builds of the library (e.g. before and after a refactor), in one interleaved run:
//   NODE_PATH=node_modules node tools/compare-builds.js <dist A> <dist B> [reps]
// Per build: S1 (sequential acquire + release of fresh keys) and S2 (64 concurrent loops), on the
// Redis at REDIS_URL under a unique prefix. Prints medians per build and the B/A ratio, with the
// spread. Build each with `npx tsc -p tsconfig.build.json --outDir <dir>`. AB_KEYS=2 locks two
// keys per call (`acquire([a, b])`) instead of one. Redis' CPU per S1 op
// (INFO cpu, user + system) is the server's work: meaningful only on a private Redis that nothing
// else uses meanwhile.
'use strict';
const { performance } = require('node:perf_hooks');
const path = require('node:path');
const Redis = require('ioredis');

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

/** Redis' own CPU time so far (µs, user + system, from INFO cpu). */
async function redisCpuUs(admin) {
  const info = await admin.info('cpu');
  const read = (name) => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)?.[1] ?? NaN);
  return (read('used_cpu_user') + read('used_cpu_sys')) * 1e6;
}

async function s1(locks, tag, admin) {
  const redisBefore = await redisCpuUs(admin);
  const cpu = process.cpuUsage();
  const start = performance.now();
  for (let i = 0; i < S1_OPS; i++) {
    const lock = await locks.acquire(target(`${tag}:${i}`));
    await lock.release();
  }
  const ms = performance.now() - start;
  const used = process.cpuUsage(cpu);
  const redisUs = (await redisCpuUs(admin)) - redisBefore;
  return {
    opsPerS: (S1_OPS / ms) * 1000,
    cpuUsPerOp: (used.user + used.system) / S1_OPS,
    redisUsPerOp: redisUs / S1_OPS,
  };
}

async function s2(locks, tag, admin) {
  const redisBefore = await redisCpuUs(admin);
  let ops = 0;
  const end = performance.now() + S2_MS;
  const loop = async (n) => {
    for (let i = 0; performance.now() < end; i++) {
      const lock = await locks.acquire(target(`${tag}:${n}:${i}`));
      await lock.release();
      ops++;
    }
  };
  const start = performance.now();
  await Promise.all(Array.from({ length: S2_LOOPS }, (_, n) => loop(n)));
  const opsPerS = (ops / (performance.now() - start)) * 1000;
  return { opsPerS, redisUsPerOp: ((await redisCpuUs(admin)) - redisBefore) / ops };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const range = (xs, digits = 0) =>
  `${Math.min(...xs).toFixed(digits)}–${Math.max(...xs).toFixed(digits)}`;

async function main() {
  const builds = [dirA, dirB].map((dir) => ({
    dir,
    LockService: require(path.resolve(dir, 'index.js')).LockService,
    s1: [],
    cpu: [],
    redis: [],
    s2: [],
    redis2: [],
  }));
  const prefix = `ab:${process.pid}:`;
  const admin = new Redis(redis);
  for (let rep = 0; rep < REPS; rep++) {
    const order = rep % 2 === 0 ? builds : [...builds].reverse();
    for (const build of order) {
      const locks = new build.LockService({ redis, prefix, startupCheck: 'off' });
      await s1(locks, `warm:${rep}`, admin); // connections and JIT
      const one = await s1(locks, `s1:${rep}`, admin);
      const many = await s2(locks, `s2:${rep}`, admin);
      build.s1.push(one.opsPerS);
      build.cpu.push(one.cpuUsPerOp);
      build.redis.push(one.redisUsPerOp);
      build.s2.push(many.opsPerS);
      build.redis2.push(many.redisUsPerOp);
      await locks.close();
    }
  }
  await admin.quit();
  for (const b of builds) {
    console.log(
      `${b.dir}: S1 ${median(b.s1).toFixed(0)} ops/s (${range(b.s1)}), ` +
        `${median(b.cpu).toFixed(1)} CPU µs/op (${range(b.cpu)}), ` +
        `Redis ${median(b.redis).toFixed(1)} CPU µs/op (${range(b.redis, 1)}); ` +
        `S2 ${median(b.s2).toFixed(0)} ops/s (${range(b.s2)}), ` +
        `Redis ${median(b.redis2).toFixed(1)} CPU µs/op (${range(b.redis2, 1)})`,
    );
  }
  const [a, b] = builds;
  console.log(
    `B/A: S1 ${(median(b.s1) / median(a.s1)).toFixed(3)}×, CPU/op ${(median(b.cpu) / median(a.cpu)).toFixed(3)}×, ` +
      `Redis CPU/op ${(median(b.redis) / median(a.redis)).toFixed(3)}×, ` +
      `S2 ${(median(b.s2) / median(a.s2)).toFixed(3)}×, ` +
      `S2 Redis CPU/op ${(median(b.redis2) / median(a.redis2)).toFixed(3)}× ` +
      `(medians of ${REPS} interleaved repetitions)`,
  );
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
