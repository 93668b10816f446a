#!/usr/bin/env node
/**
 * `npm test`: every Jest suite, in two runs. First everything but the fault suite on 2 workers:
 * each e2e suite writes under its own key prefix on the shared Redis and starts its own servers on
 * free ports, and most of their time is spent waiting (leases, renewals, restarts), not computing.
 * Then the fault suite (`test/fault/`) in band, alone: its scenarios hold the lock library to tight
 * time bounds, and two of them (waiter scale, load) are CPU-bound — beside another worker, the one
 * would eat the other's budgets. Both runs always run; the exit code is the first failure's.
 *
 * With arguments (`npm test -- <jest args>`) it is one in-band Jest run with them, as before:
 *   npm test -- test/fair.e2e-spec.ts
 * `TEST_WORKERS=1 npm test` runs the first part in band too (a one-core machine).
 */
const { spawnSync } = require('node:child_process');
const path = require('node:path');

const jest = require.resolve('jest/bin/jest');
const root = path.resolve(__dirname, '..');
/** Runs alone, after the rest: a path pattern, as Jest matches it. */
const SERIAL = '/test/fault/';
/** Left out: the suites `npm run test:matrix` runs (they need test-only server binaries). */
const MATRIX_ONLY = process.env.TEST_MATRIX === '1' ? [] : require('./matrix-only');
const workers = process.env.TEST_WORKERS ?? '2';

/** Runs Jest with `args` in this checkout; returns its exit code. */
function jestRun(title, args) {
  if (title) console.log(`\n--- npm test: ${title}\n`);
  const run = spawnSync(process.execPath, [jest, ...args], { cwd: root, stdio: 'inherit' });
  if (run.error) throw run.error;
  // Killed by a signal (Ctrl-C): stop here, as one Jest run would.
  if (run.signal) process.kill(process.pid, run.signal);
  return run.status ?? 1;
}

const extra = process.argv.slice(2);
if (extra.length > 0) process.exit(jestRun(undefined, ['--runInBand', ...extra]));

const parallel = jestRun(`every suite but ${SERIAL}, on ${workers} workers`, [
  `--maxWorkers=${workers}`,
  '--testPathIgnorePatterns',
  '/node_modules/',
  SERIAL,
  ...MATRIX_ONLY,
]);
const serial = jestRun(`${SERIAL} in band`, ['--runInBand', SERIAL]);
process.exit(parallel || serial);
