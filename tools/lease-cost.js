// What one uncontended acquire + release of a reader's share and of a semaphore permit costs Redis
// itself, in two builds (e.g. before and after a change to their scripts):
//   NODE_PATH=node_modules REDIS_URL=redis://127.0.0.1:<private port> \
//     node tools/lease-cost.js <dist A> <dist B> [rounds]
// Runs each build's backend commands (acquire + release) on fresh keys, 100 pairs sent together
// per block, builds and kinds taking turns. Per build and kind, per acquire + release: the
// commands Redis ran inside the scripts, and the µs INFO commandstats counts for the scripts — p10,
// p25 and median over the blocks (on a loaded machine the low quantiles are the cost; the median
// adds what other processes took from Redis meanwhile). Use a private redis-server: anything else
// it runs is counted too. Build each side with `npx tsc -p tsconfig.build.json --outDir <dir>`.
'use strict';
const { randomBytes } = require('node:crypto');
const path = require('node:path');
const { commandStats, scriptCost } = require('./command-stats');

const [dirA, dirB, roundsArg] = process.argv.slice(2);
if (!dirA || !dirB) {
  console.error('usage: node tools/lease-cost.js <dist A> <dist B> [rounds]');
  process.exit(2);
}
const ROUNDS = Number(roundsArg ?? 100);
const BLOCK = 100;
const TTL = 30_000;
const redis = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const KINDS = { read: { type: 'read' }, permit: { type: 'semaphore', permits: BLOCK } };

const quantile = (xs, q) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) * q)];

/** One block: BLOCK leases of `kind` on fresh keys (a semaphore: BLOCK permits of one key). */
async function block(build, probe, kind, tag) {
  const names = Array.from({ length: BLOCK }, (_, i) =>
    kind.type === 'semaphore' ? `${tag}` : `${tag}:${i}`,
  );
  const keys = names.map((name) => build.lockRedisKeys('cost:', name, kind));
  const tokens = keys.map(() => randomBytes(16).toString('hex'));
  const before = await commandStats(probe);
  const fences = await Promise.all(keys.map((k, i) => build.backend.acquire(k, tokens[i], TTL)));
  const released = await Promise.all(keys.map((k, i) => build.backend.release(k, tokens[i])));
  const after = await commandStats(probe);
  if (!fences.every((f) => f > 0) || !released.every(Boolean)) {
    throw new Error('an uncontended acquire or release failed: is anything else on this Redis?');
  }
  return scriptCost(before, after, BLOCK);
}

async function main() {
  const Redis = require('ioredis');
  const probe = new Redis(redis);
  const builds = [dirA, dirB].map((dir) => {
    const load = (file) => require(path.resolve(dir, file));
    const options = load('options/resolve-options.js').resolveOptions({
      redis,
      prefix: 'cost:',
      startupCheck: 'off',
    });
    return {
      dir,
      backend: load('backends/create-backend.js').createBackend(options).backend,
      lockRedisKeys: load('keys/lock-keys.js').lockRedisKeys,
      results: Object.fromEntries(Object.keys(KINDS).map((k) => [k, { usec: [], inner: [] }])),
    };
  });
  const run = `${process.pid}`;
  const pairs = builds.flatMap((build, b) =>
    Object.keys(KINDS).map((kind) => ({ build, b, kind })),
  );
  for (const { build, b, kind } of pairs) await block(build, probe, KINDS[kind], `${run}:w:${b}`);
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? pairs : [...pairs].reverse();
    for (const { build, b, kind } of order) {
      // Key names of one length for every side: a longer name costs Redis a little more.
      const cost = await block(build, probe, KINDS[kind], `${run}:${round}:${b}:${kind}`);
      build.results[kind].usec.push(cost.usec);
      build.results[kind].inner.push(cost.inner);
    }
  }
  const line = (xs) =>
    `p10 ${quantile(xs, 0.1).toFixed(2)}, p25 ${quantile(xs, 0.25).toFixed(2)}, ` +
    `median ${quantile(xs, 0.5).toFixed(2)}`;
  for (const kind of Object.keys(KINDS)) {
    for (const { dir, results } of builds) {
      const r = results[kind];
      console.log(
        `${kind} ${dir}: ${quantile(r.inner, 0.5).toFixed(1)} commands in the scripts; µs ${line(r.usec)}`,
      );
    }
    const [a, b] = builds.map((build) => build.results[kind].usec);
    console.log(
      `${kind} B/A: µs p10 ${(quantile(b, 0.1) / quantile(a, 0.1)).toFixed(3)}×, ` +
        `p25 ${(quantile(b, 0.25) / quantile(a, 0.25)).toFixed(3)}× — ${ROUNDS} rounds of ` +
        `${BLOCK} acquire + release per build and kind`,
    );
  }
  probe.disconnect();
  await Promise.all(builds.map((build) => build.backend.close()));
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
