/**
 * The ESM consumer check: a NestJS 12 app written as an ES module (`"type": "module"`, TypeScript
 * compiled by tsc with `module: nodenext`) imports the packed nestjs-redis-lock — a CommonJS
 * package — by name, and runs it for real against Redis. compat/run.sh runs it in the same
 * temporary install as check.js, under `timeout`: the process must exit by itself after the app
 * closes, so a leaked socket or timer fails the run. Env: REDIS_URL.
 */
import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import type { INestApplicationContext } from '@nestjs/common';
import { Redis } from 'ioredis';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { performance } from 'node:perf_hooks';
import {
  currentLock,
  LockNotAcquiredError,
  LockService,
  LockServiceClosedError,
  outsideLocks,
  RedisLockError,
} from 'nestjs-redis-lock';
import { AppModule } from './app.module.js';
import { HOLD_MS, PREFIX, REDIS_URL } from './config.js';
import { checkExportsMatchRequire } from './exports.js';
import { ReportService } from './report.service.js';

const require = createRequire(import.meta.url);
const versionOf = (name: string) =>
  (require(`${name}/package.json`) as { version: string }).version;
const CASES = 8;

/** One call of two at once runs, the other is refused with our error class, seen from ESM. */
async function sameKeyExcludes(reports: ReportService) {
  const results = await Promise.allSettled([reports.build('t1'), reports.build('t1')]);
  const ran = results.filter((r) => r.status === 'fulfilled');
  const refused = results.filter((r) => r.status === 'rejected');
  assert.equal(ran.length, 1, `one call runs: ${describe(results)}`);
  assert.equal(refused.length, 1, `one call is refused: ${describe(results)}`);
  const error: unknown = refused[0].reason;
  assert.ok(error instanceof LockNotAcquiredError, `LockNotAcquiredError, got ${String(error)}`);
  assert.ok(error instanceof RedisLockError, 'and a RedisLockError');
  assert.ok(error instanceof Error, 'and an Error');
  assert.equal(error.key, 'report:t1');
  assert.equal((await reports.build('t1')).tenantId, 't1', 'free again after the first settled');
}

async function busySkips(reports: ReportService) {
  const [ran, skipped] = await Promise.all([reports.build('t2'), reports.buildIfIdle('t2')]);
  assert.equal(ran.tenantId, 't2');
  assert.equal(skipped, undefined, "onBusy: 'skip' resolves undefined without running");
}

async function differentKeysInParallel(reports: ReportService) {
  reports.maxActive = 0;
  const started = performance.now();
  const done = await Promise.all([reports.build('a'), reports.build('b')]);
  assert.deepEqual(
    done.map((r) => r.tenantId),
    ['a', 'b'],
  );
  assert.equal(reports.maxActive, 2, 'both ran at the same time');
  assert.ok(performance.now() - started < 2 * HOLD_MS, 'in about one hold, not two');
}

/** `withLock`, `currentLock()` and re-entrancy share one lock context with the decorator. */
async function withLockReenters(reports: ReportService, locks: LockService) {
  const result = await locks.withLock('job', async (lock) => {
    assert.equal(currentLock(), lock, 'currentLock() is the withLock handle');
    assert.equal(await locks.isLocked('job'), true);
    assert.equal(await outsideLocks(() => locks.tryAcquire('job')), null, 'busy for others');
    return 'done';
  });
  assert.equal(result, 'done');
  assert.equal(await locks.isLocked('job'), false, 'released after the callback');
  const { outer, inner } = await reports.rebuild('t3');
  assert.equal(inner.fence, outer, 'the @Locked call inside withLock re-entered its hold');
}

async function acquireRelease(locks: LockService) {
  const lock = await locks.acquire('manual', { ttl: 5_000 });
  assert.equal(lock.isHeld, true);
  await assert.rejects(locks.acquire('manual'), LockNotAcquiredError, 'held: acquire rejects');
  assert.equal(await lock.release(), true, 'ours to the end');
  const next = await locks.acquire('manual');
  assert.ok(next.fence > lock.fence, 'fence increases');
  assert.equal(await next.release(), true);
}

async function main() {
  const deadline = setTimeout(() => {
    console.error('compat esm: timed out after 60 s');
    process.exit(1);
  }, 60_000);
  deadline.unref();

  const nest = versionOf('@nestjs/core');
  console.log(
    `compat esm: node ${process.versions.node}, nestjs-redis-lock ${versionOf('nestjs-redis-lock')}, ` +
      `@nestjs/core ${nest}, ioredis ${versionOf('ioredis')}, "type": "module"`,
  );
  let passed = 0;
  let failed = 0;
  const run = async (name: string, fn: () => Promise<unknown>) => {
    const started = performance.now();
    try {
      const note = await fn();
      passed++;
      const extra = note === undefined ? '' : `, ${String(note)}`;
      console.log(`  ok   ${name} (${Math.round(performance.now() - started)} ms${extra})`);
      return true;
    } catch (error) {
      failed++;
      console.log(`  FAIL ${name}`);
      console.log(indent(error instanceof Error && error.stack ? error.stack : String(error)));
      return false;
    }
  };

  await run('ESM named imports = require() exports, same values', async () => {
    return `${checkExportsMatchRequire()} names`;
  });

  let app: INestApplicationContext | undefined;
  try {
    const booted = await run(
      'Nest 12 app boots; LockService injected by its ESM-imported class',
      async () => {
        app = await NestFactory.createApplicationContext(AppModule, { logger: ['error', 'warn'] });
        const injected = app.get(ReportService).locks;
        assert.ok(injected instanceof LockService, `injected ${String(injected)}`);
        assert.equal(injected, app.get(LockService), 'the module registered the same class');
      },
    );
    if (booted && app) {
      const reports = app.get(ReportService);
      const locks = app.get(LockService);
      await run('@Locked same key: 2 concurrent calls -> 1 runs, 1 LockNotAcquiredError', () =>
        sameKeyExcludes(reports),
      );
      await run("@Locked onBusy: 'skip' while busy -> undefined", () => busySkips(reports));
      await run('@Locked different keys run in parallel', () => differentKeysInParallel(reports));
      await run('LockService.withLock + currentLock + re-entrant @Locked', () =>
        withLockReenters(reports, locks),
      );
      await run('LockService acquire/release, fence increases', () => acquireRelease(locks));
      await run('app.close() closes LockService: acquire -> LockServiceClosedError', async () => {
        const closing = app!;
        app = undefined;
        await closing.close();
        await assert.rejects(locks.acquire('after-close'), LockServiceClosedError);
      });
    }
  } finally {
    await app?.close();
    await deleteOurKeys();
  }

  console.log(`compat esm: NestJS ${nest} ESM app: ${passed} passed, ${failed} failed`);
  process.exitCode = failed === 0 && passed === CASES ? 0 : 1;
}

/** Deletes every key under our prefix (fence counters outlive their locks). */
async function deleteOurKeys() {
  const client = new Redis(REDIS_URL, { lazyConnect: true });
  try {
    await client.connect();
    let cursor = '0';
    do {
      const [next, keys] = await client.scan(cursor, 'MATCH', `${PREFIX}*`, 'COUNT', 500);
      if (keys.length > 0) await client.del(...keys);
      cursor = next;
    } while (cursor !== '0');
  } finally {
    client.disconnect();
  }
}

function describe(results: PromiseSettledResult<unknown>[]) {
  return results
    .map((r) => (r.status === 'fulfilled' ? 'ok' : `err(${String(r.reason)})`))
    .join(', ');
}

function indent(text: string) {
  return text
    .split('\n')
    .map((line) => `       ${line}`)
    .join('\n');
}

await main();
