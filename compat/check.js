'use strict';
/**
 * Compatibility check outside jest: loads the *packed* nestjs-redis-lock (installed from the
 * `npm pack` tarball by compat/run.sh) next to NestJS 12 and ioredis 6, and runs it for real.
 *
 * NestJS 12 is ESM-only; Node >= 20.19 can `require()` it, which is exactly what the library's
 * CommonJS build does. Plain CommonJS on purpose (no TypeScript compiler here): decorators are
 * applied with `Reflect.decorate`, and DI types are given with `Reflect.metadata('design:paramtypes')`.
 *
 * Cases: (1) LockService acquire / tryAcquire / release on a URL (the library's own ioredis 6
 * connection); (2) a Nest 12 app with a `@Locked('order:<userId>')` provider method called twice at
 * once; (3) a `@Post(':userId') @Locked('order:<userId>')` route hit twice at once (201 + 409 with
 * Retry-After). (2) and (3) run on an ioredis 6 client created here and passed in as `redis`: the
 * library must use it and must not close it. (4) `nestjs-redis-lock/testing`: RedisLockTestingModule
 * in a Nest 12 app, `@Locked` on in-memory locks, with the main entry's LockService class.
 *
 * Keys live under a unique prefix and are deleted at the end. The script exits by itself (run.sh
 * runs it under `timeout`, so a leaked handle fails the run). Env: REDIS_URL (default
 * redis://127.0.0.1:6379).
 */
require('reflect-metadata');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { randomBytes } = require('node:crypto');
const { performance } = require('node:perf_hooks');
const { setTimeout } = require('node:timers');
const { setTimeout: sleep } = require('node:timers/promises');

const REDIS_URL = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
const PREFIX = `nrl-compat:${process.pid}-${randomBytes(4).toString('hex')}:`;
const HOLD_MS = 200;

const lib = require('nestjs-redis-lock');
const common = require('@nestjs/common');
const core = require('@nestjs/core');
const ioredis = require('ioredis');

const { LockService, RedisLockModule, Locked, LockNotAcquiredError } = lib;
const { Injectable, Controller, Module, Post, Param } = common;
const { NestFactory } = core;
const Redis = ioredis.Redis || ioredis.default || ioredis;

// ---------------------------------------------------------------------------------------------
// Preflight: versions, module resolution and the packed shape. Any failure here is fatal.

function resolveFrom(request, from) {
  return require.resolve(request, { paths: [from] });
}

function packageJsonOf(name, from) {
  return JSON.parse(fs.readFileSync(resolveFrom(`${name}/package.json`, from), 'utf8'));
}

function preflight() {
  const libEntry = require.resolve('nestjs-redis-lock');
  const libRoot = path.dirname(resolveFrom('nestjs-redis-lock/package.json', __dirname));
  const libDist = path.dirname(libEntry);

  // The published shape: `exports`/`main` lead to dist/index.js, `types` exists, only dist and the
  // package's own documents (README, LICENSE, CHANGELOG) shipped.
  const libPkg = packageJsonOf('nestjs-redis-lock', __dirname);
  assert.equal(path.relative(libRoot, libEntry), path.join('dist', 'index.js'), 'entry point');
  assert.equal(
    path.relative(libRoot, require.resolve('nestjs-redis-lock/testing')),
    path.join('dist', 'testing', 'index.js'),
    'testing entry point',
  );
  for (const field of [
    libPkg.types,
    libPkg.exports?.['.']?.types,
    libPkg.exports?.['./testing']?.types,
  ]) {
    assert.ok(field && fs.existsSync(path.join(libRoot, field)), `types file ${field} is packed`);
  }
  const shipped = fs.readdirSync(libRoot).sort();
  assert.deepEqual(
    shipped.filter(
      (name) => !['dist', 'package.json', 'README.md', 'LICENSE', 'CHANGELOG.md'].includes(name),
    ),
    [],
    `unexpected files in the package: ${shipped.join(', ')}`,
  );

  const versions = {
    lib: libPkg.version,
    common: packageJsonOf('@nestjs/common', __dirname).version,
    core: packageJsonOf('@nestjs/core', __dirname).version,
    express: packageJsonOf('@nestjs/platform-express', __dirname).version,
    ioredis: packageJsonOf('ioredis', __dirname).version,
    node: process.versions.node,
  };
  console.log(
    `compat: node ${versions.node}, nestjs-redis-lock ${versions.lib}, @nestjs/common ${versions.common}, ` +
      `@nestjs/core ${versions.core}, @nestjs/platform-express ${versions.express}, ioredis ${versions.ioredis}`,
  );
  assert.equal(major(versions.common), 12, '@nestjs/common major');
  assert.equal(major(versions.core), 12, '@nestjs/core major');
  assert.equal(major(versions.express), 12, '@nestjs/platform-express major');
  assert.equal(major(versions.ioredis), 6, 'ioredis major');
  assert.equal(
    packageJsonOf('@nestjs/common', __dirname).type,
    'module',
    '@nestjs/common is ESM (loaded here through require(esm))',
  );

  // The library's peers must be the very same modules as ours (one ioredis, one Nest): otherwise
  // `instanceof Redis` and Nest's DI tokens would silently differ.
  for (const peer of ['@nestjs/common', '@nestjs/core', 'ioredis', 'rxjs', 'reflect-metadata']) {
    assert.equal(resolveFrom(peer, libDist), require.resolve(peer), `library resolves ${peer}`);
  }

  // @nestjs/terminus is an optional peer, not installed here: the main entry loaded above without
  // it; only the `nestjs-redis-lock/health` entry needs it, and says so when required.
  assert.throws(() => require.resolve('@nestjs/terminus'), 'terminus is not installed');
  assert.equal(
    path.relative(libRoot, require.resolve('nestjs-redis-lock/health')),
    path.join('dist', 'health', 'index.js'),
    'health entry point',
  );
  assert.throws(
    () => require('nestjs-redis-lock/health'),
    (error) => error.code === 'MODULE_NOT_FOUND' && /@nestjs\/terminus/.test(error.message),
    'the health entry needs @nestjs/terminus',
  );

  // @opentelemetry/api is an optional peer, not installed: the library must load and lock without it.
  assert.throws(
    () => resolveFrom('@opentelemetry/api', libDist),
    /Cannot find module/,
    '@opentelemetry/api is absent here',
  );
  return versions;
}

function major(version) {
  return Number(version.split('.')[0]);
}

// ---------------------------------------------------------------------------------------------
// Plain-JS decorator helpers (what TypeScript's __decorate / __param / __metadata emit).

function decorateClass(target, decorators, paramTypes) {
  const all = paramTypes
    ? [...decorators, Reflect.metadata('design:paramtypes', paramTypes)]
    : decorators;
  return Reflect.decorate(all, target);
}

function decorateMethod(target, name, decorators) {
  const descriptor = Object.getOwnPropertyDescriptor(target.prototype, name);
  const result = Reflect.decorate(decorators, target.prototype, name, descriptor);
  Object.defineProperty(target.prototype, name, result || descriptor);
}

function param(index, decorator) {
  return (target, key) => decorator(target, key, index);
}

// ---------------------------------------------------------------------------------------------
// (1) LockService on its own, connecting by URL (an ioredis 6 connection the library owns).

async function lockServiceAcquireRelease() {
  const locks = new LockService({ redis: REDIS_URL, prefix: PREFIX });
  const events = [];
  for (const name of ['acquired', 'busy', 'released']) locks.on(name, () => events.push(name));
  try {
    const key = 'acquire-release';
    const lock = await locks.acquire(key, { ttl: 5_000 });
    assert.equal(lock.key, key);
    assert.equal(typeof lock.fence, 'number');
    assert.equal(lock.isHeld, true);
    assert.equal(await locks.isLocked(key), true);
    assert.equal(await locks.tryAcquire(key), null, 'tryAcquire while held resolves null');
    await assert.rejects(locks.acquire(key), LockNotAcquiredError, 'acquire while held rejects');
    assert.equal(await lock.release(), true, 'release of a held lock resolves true');
    assert.equal(await locks.isLocked(key), false);
    const next = await locks.tryAcquire(key);
    assert.ok(next, 'free again after release');
    assert.ok(next.fence > lock.fence, 'fence increases');
    assert.equal(await next.release(), true);
    assert.deepEqual(
      events,
      ['acquired', 'busy', 'busy', 'released', 'acquired', 'released'],
      'lifecycle events without @opentelemetry/api',
    );
  } finally {
    await locks.close();
  }
}

// ---------------------------------------------------------------------------------------------
// The Nest 12 app for (2) and (3).

function buildAppModule(redis) {
  class OrderService {
    async createOrder(userId) {
      await sleep(HOLD_MS);
      return `order for ${userId}`;
    }
  }
  decorateMethod(OrderService, 'createOrder', [Locked('order:<userId>')]);
  decorateClass(OrderService, [Injectable()]);

  class OrderController {
    constructor(orders) {
      this.orders = orders;
    }

    async create(userId) {
      await sleep(HOLD_MS);
      return { userId, created: true };
    }
  }
  // Same order as TypeScript: the decorator listed last is applied first.
  decorateMethod(OrderController, 'create', [
    Post(':userId'),
    Locked('order:<userId>'),
    param(0, Param('userId')),
  ]);
  decorateClass(OrderController, [Controller('orders')], [OrderService]);

  class AppModule {}
  decorateClass(AppModule, [
    Module({
      imports: [RedisLockModule.forRoot({ redis, prefix: PREFIX })],
      controllers: [OrderController],
      providers: [OrderService],
    }),
  ]);
  return { AppModule, OrderService };
}

// (2) A decorated provider method called twice at once: one runs, one is refused.
async function decoratedProviderMethod(app, OrderService) {
  const orders = app.get(OrderService);
  const results = await Promise.allSettled([
    orders.createOrder('provider-user'),
    orders.createOrder('provider-user'),
  ]);
  const fulfilled = results.filter((r) => r.status === 'fulfilled');
  const rejected = results.filter((r) => r.status === 'rejected');
  assert.equal(fulfilled.length, 1, `one call runs: ${describe(results)}`);
  assert.equal(fulfilled[0].value, 'order for provider-user');
  assert.equal(rejected.length, 1, `one call is refused: ${describe(results)}`);
  assert.ok(
    rejected[0].reason instanceof LockNotAcquiredError,
    `refused with LockNotAcquiredError, got ${rejected[0].reason}`,
  );
  assert.equal(rejected[0].reason.key, 'order:provider-user');
  // Released after the method settled: a third call runs.
  assert.equal(await orders.createOrder('provider-user'), 'order for provider-user');
}

// (3) A decorated route hit twice at once: 201 and 409 with Retry-After.
async function decoratedRoute(app) {
  const url = `${await app.getUrl()}/orders/route-user`.replace('[::1]', '127.0.0.1');
  const responses = await Promise.all([post(url), post(url)]);
  const statuses = responses.map((r) => r.status).sort();
  assert.deepEqual(statuses, [201, 409], `statuses ${statuses}`);
  const created = responses.find((r) => r.status === 201);
  assert.deepEqual(created.body, { userId: 'route-user', created: true });
  const busy = responses.find((r) => r.status === 409);
  assert.match(busy.retryAfter ?? '', /^\d+$/, 'Retry-After header on the 409');
  // The default body: Nest's shape, without the key (it goes to the log).
  assert.deepEqual(busy.body, {
    statusCode: 409,
    error: 'Conflict',
    message: 'Another request is working on the same resource. Try again shortly.',
  });
  // Released after the response: the next request gets through.
  assert.equal((await post(url)).status, 201);
}

async function post(url) {
  const response = await globalThis.fetch(url, { method: 'POST' });
  return {
    status: response.status,
    retryAfter: response.headers.get('retry-after'),
    body: await response.json(),
  };
}

function describe(results) {
  return results
    .map((r) => (r.status === 'fulfilled' ? `ok(${r.value})` : `err(${r.reason})`))
    .join(', ');
}

// (4) The testing entry: RedisLockTestingModule in a Nest 12 app, on in-memory locks. Its
// LockService must be the main entry's class (one copy of the library, two entry points).
async function testingModule() {
  const { RedisLockTestingModule } = require('nestjs-redis-lock/testing');
  class Jobs {
    async run() {
      await sleep(HOLD_MS);
      return 'ran';
    }
  }
  decorateMethod(Jobs, 'run', [Locked('job')]);
  decorateClass(Jobs, [Injectable()]);
  class TestModule {}
  decorateClass(TestModule, [
    Module({ imports: [RedisLockTestingModule.forRoot()], providers: [Jobs] }),
  ]);
  const app = await NestFactory.createApplicationContext(TestModule, { logger: ['error'] });
  try {
    assert.ok(app.get(LockService) instanceof LockService, "the main entry's LockService");
    const jobs = app.get(Jobs);
    const results = await Promise.allSettled([jobs.run(), jobs.run()]);
    assert.deepEqual(
      results.map((r) => (r.status === 'fulfilled' ? r.value : r.reason.constructor.name)).sort(),
      ['LockNotAcquiredError', 'ran'],
      `one call runs, one is refused: ${describe(results)}`,
    );
  } finally {
    await app.close();
  }
}

// ---------------------------------------------------------------------------------------------

async function main() {
  const deadline = setTimeout(() => {
    console.error('compat: timed out after 60 s');
    process.exit(1);
  }, 60_000);
  deadline.unref();

  const versions = preflight();
  let passed = 0;
  let failed = 0;
  /** A case counts in the summary; a step (setup / teardown check) counts only when it fails. */
  const run = async (kind, name, fn) => {
    const started = performance.now();
    try {
      await fn();
      if (kind === 'case') passed++;
      console.log(
        `  ${kind === 'case' ? 'ok  ' : '  - '} ${name} (${Math.round(performance.now() - started)} ms)`,
      );
      return true;
    } catch (error) {
      failed++;
      console.log(`  FAIL ${name}`);
      console.log(indent(error && error.stack ? error.stack : String(error)));
      return false;
    }
  };

  // A client we own, passed to the module: ioredis 6 really carries (2) and (3).
  const client = new Redis(REDIS_URL, { lazyConnect: true });
  client.on('error', () => undefined);
  let commandsThroughOurClient = 0;
  const sendCommand = client.sendCommand.bind(client);
  client.sendCommand = (...args) => {
    commandsThroughOurClient++;
    return sendCommand(...args);
  };

  try {
    await client.connect().catch((error) => {
      throw new Error(`cannot reach Redis at ${REDIS_URL} (set REDIS_URL): ${error.message}`);
    });
    await run(
      'case',
      'LockService acquire/tryAcquire/release (redis: URL)',
      lockServiceAcquireRelease,
    );
    await run(
      'case',
      'nestjs-redis-lock/testing: RedisLockTestingModule, @Locked on in-memory locks',
      testingModule,
    );

    let app;
    let OrderService;
    await run(
      'step',
      'Nest 12 app boots: RedisLockModule.forRoot({ redis: <ioredis 6 client> })',
      async () => {
        const built = buildAppModule(client);
        OrderService = built.OrderService;
        app = await NestFactory.create(built.AppModule, { logger: ['error', 'warn'] });
        await app.listen(0, '127.0.0.1');
      },
    );
    if (app) {
      const before = commandsThroughOurClient;
      try {
        await run(
          'case',
          '@Locked provider method: 2 concurrent calls -> 1 runs, 1 LockNotAcquiredError',
          () => decoratedProviderMethod(app, OrderService),
        );
        await run(
          'case',
          '@Locked @Post(":userId") route: 2 concurrent requests -> 201 + 409 Retry-After',
          () => decoratedRoute(app),
        );
      } finally {
        await app.close();
      }
      await run(
        'step',
        'our ioredis 6 client carried the locks and is still open after app.close()',
        async () => {
          assert.ok(
            commandsThroughOurClient > before,
            'the library sent its commands through our client',
          );
          assert.equal(
            client.status,
            'ready',
            'the module did not close a client it did not create',
          );
          assert.equal(await client.ping(), 'PONG');
        },
      );
    }
  } finally {
    await cleanUp(client);
    await client.quit().catch(() => client.disconnect());
  }

  console.log(
    `compat: NestJS ${versions.common} + ioredis ${versions.ioredis}: ${passed} passed, ${failed} failed`,
  );
  process.exitCode = failed === 0 && passed === 4 ? 0 : 1;
}

/** Deletes every key under our prefix (fence counters outlive their locks). */
async function cleanUp(client) {
  if (client.status !== 'ready') return;
  let cursor = '0';
  do {
    const [next, keys] = await client.scan(cursor, 'MATCH', `${PREFIX}*`, 'COUNT', 500);
    if (keys.length > 0) await client.del(...keys);
    cursor = next;
  } while (cursor !== '0');
}

function indent(text) {
  return text
    .split('\n')
    .map((line) => `       ${line}`)
    .join('\n');
}

main().catch((error) => {
  console.error('compat: FAILED');
  console.error(error);
  process.exitCode = 1;
});
