// What one uncontended acquire + release costs Redis itself, default mode against fair mode:
//   NODE_PATH=node_modules REDIS_URL=redis://127.0.0.1:<private port> \
//     node tools/script-cost.js <dist> [rounds]
// Runs a build's backend commands (default mode: acquire + release; fair mode: fairAcquire +
// fairRelease) on fresh keys, 100 pairs sent together per block, the modes taking turns. Per mode,
// per acquire + release: the commands Redis ran inside the scripts, and the µs INFO commandstats
// counts for the scripts — p10, p25 and median over the blocks (on a loaded machine the low
// quantiles are the cost; the median adds what other processes took from Redis meanwhile). Use a
// private redis-server: anything else it runs is counted too.
// CALLGRIND_PID: the pid of that redis-server run under `valgrind --tool=callgrind` (with
// `--toggle-collect=evalShaCommand`: the scripts only; without it: the whole server, reading and
// writing included) adds the instructions it executed per acquire + release, which no load on
// the machine changes.
'use strict';
const { execFileSync } = require('node:child_process');
const { randomBytes } = require('node:crypto');
const path = require('node:path');
const { commandStats, scriptCost } = require('./command-stats');

const [dist, roundsArg] = process.argv.slice(2);
if (!dist) {
  console.error('usage: node tools/script-cost.js <dist> [rounds]');
  process.exit(2);
}
const ROUNDS = Number(roundsArg ?? 200);
const BLOCK = 100;
const redis = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const callgrindPid = process.env.CALLGRIND_PID;
const load = (file) => require(path.resolve(dist, file));
const { createBackend } = load('backends/create-backend.js');
const { resolveOptions } = load('options/resolve-options.js');
const { lockRedisKeys } = load('keys/lock-keys.js');

const TTL = 30_000;
const WAITER_TTL = 4_000;
const MODES = {
  default: {
    acquire: (backend, keys, token) => backend.acquire(keys, token, TTL),
    release: (backend, keys, token) => backend.release(keys, token),
  },
  fair: {
    acquire: (backend, keys, token) =>
      backend.fairAcquire(keys, token, TTL, false, WAITER_TTL).then((reply) => reply.granted),
    release: (backend, keys, token) => backend.fairRelease(keys, token),
  },
};

/** Instructions the callgrind-run server executed since the last call (then zeroed). */
function instructions() {
  if (!callgrindPid) return 0;
  const out = execFileSync('callgrind_control', ['-e', 'Ir', callgrindPid], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  execFileSync('callgrind_control', ['-z', callgrindPid], { stdio: 'ignore' });
  return [...out.matchAll(/Th \d+\s+([\d,]+)/g)].reduce(
    (sum, m) => sum + Number(m[1].replaceAll(',', '')),
    0,
  );
}

const quantile = (xs, q) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) * q)];

async function block(backend, probe, mode, tag) {
  const keys = Array.from({ length: BLOCK }, (_, i) => lockRedisKeys('cost:', `${tag}:${i}`));
  const tokens = keys.map(() => randomBytes(16).toString('hex'));
  const before = await commandStats(probe);
  instructions();
  const fences = await Promise.all(keys.map((k, i) => mode.acquire(backend, k, tokens[i])));
  const released = await Promise.all(keys.map((k, i) => mode.release(backend, k, tokens[i])));
  const ir = instructions();
  const after = await commandStats(probe);
  if (!fences.every((f) => f > 0) || !released.every(Boolean)) {
    throw new Error('an uncontended acquire or release failed: is anything else on this Redis?');
  }
  return { ...scriptCost(before, after, BLOCK), ir: ir / BLOCK };
}

async function main() {
  const Redis = require('ioredis');
  const probe = new Redis(redis);
  const options = resolveOptions({ redis, prefix: 'cost:', startupCheck: 'off' });
  const { backend } = createBackend(options);
  const names = Object.keys(MODES);
  const results = Object.fromEntries(names.map((n) => [n, { usec: [], inner: [], ir: [] }]));
  const run = `${process.pid}`;
  // Key names of one length for every mode: a longer name costs Redis a little more.
  const tag = (round, name) => `${run}:${round}:${names.indexOf(name)}`;
  for (const name of names) await block(backend, probe, MODES[name], tag('warm', name));
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? names : [...names].reverse();
    for (const name of order) {
      const cost = await block(backend, probe, MODES[name], tag(round, name));
      for (const metric of ['usec', 'inner', 'ir']) results[name][metric].push(cost[metric]);
    }
  }
  const line = (xs, digits) =>
    `p10 ${quantile(xs, 0.1).toFixed(digits)}, p25 ${quantile(xs, 0.25).toFixed(digits)}, ` +
    `median ${quantile(xs, 0.5).toFixed(digits)}`;
  for (const name of names) {
    const r = results[name];
    console.log(
      `${name}: ${quantile(r.inner, 0.5).toFixed(1)} commands in the scripts; µs ${line(r.usec, 2)}` +
        (callgrindPid ? `; instructions ${quantile(r.ir, 0.5).toFixed(0)}` : ''),
    );
  }
  const [a, b] = names.map((n) => results[n]);
  console.log(
    `fair/default: µs p10 ${(quantile(b.usec, 0.1) / quantile(a.usec, 0.1)).toFixed(3)}×, ` +
      `p25 ${(quantile(b.usec, 0.25) / quantile(a.usec, 0.25)).toFixed(3)}×` +
      (callgrindPid
        ? `; instructions ${(quantile(b.ir, 0.5) / quantile(a.ir, 0.5)).toFixed(3)}×`
        : '') +
      ` — ${ROUNDS} rounds of ${BLOCK} acquire + release per mode`,
  );
  probe.disconnect();
  await backend.close();
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error);
    process.exit(1);
  },
);
