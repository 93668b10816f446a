/**
 * A loud boot and honest connection errors: at startup the module logs where it connects and that
 * Redis answered (or warns with the real cause: refused, wrong password, an ACL without the lock's
 * commands), warns about a `maxmemory-policy` that can evict lock keys, and by default
 * (`startupCheck: 'fail'`) stops the bootstrap instead, after bounded retries while Redis is out
 * of reach; `'warn'` starts anyway. Lock calls on a connection that never came
 * up, or that Redis refused for good (auth), fail at once with that cause; `close()` stays prompt.
 * Every server here is this file's own `redis-server` (the ACL and password changes included).
 */
import { Module, type INestApplicationContext, type LoggerService } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import Redis from 'ioredis';
import {
  LockService,
  RedisCommandError,
  RedisLockConfigError,
  RedisLockModule,
  RedisUnavailableError,
  type RedisLockModuleOptions,
} from 'nestjs-redis-lock';
import { freePort } from './support/free-port';
import { startRedis, stopAllRedis, type RedisServer } from './support/redis-server';
import { closeAllProxies, startTcpProxy } from './support/tcp-proxy';
import { now } from './support/time';
import { uniquePrefix } from './support/unique-prefix';

const prefix = uniquePrefix('startup-check');

/** Collects what Nest's Logger is asked to print, for assertions. */
class CapturingLogger implements LoggerService {
  readonly lines: { level: string; message: string }[] = [];
  log(message: unknown): void {
    this.lines.push({ level: 'log', message: String(message) });
  }
  warn(message: unknown): void {
    this.lines.push({ level: 'warn', message: String(message) });
  }
  error(message: unknown): void {
    this.lines.push({ level: 'error', message: String(message) });
  }
  debug(): void {}
  verbose(): void {}
  /** Lines of `level` that mention `text`. */
  of(level: string, text?: string | RegExp): string[] {
    return this.lines
      .filter((line) => line.level === level)
      .map((line) => line.message)
      .filter((message) => text === undefined || message.match(text));
  }
}

interface Booted {
  app?: INestApplicationContext;
  error?: unknown;
  logs: CapturingLogger;
  /** How long bootstrap took (ms). */
  took: number;
}

const apps: INestApplicationContext[] = [];

/** Starts a Nest application context with the lock module; never throws. */
async function boot(options: RedisLockModuleOptions): Promise<Booted> {
  const logs = new CapturingLogger();
  @Module({ imports: [RedisLockModule.forRoot({ prefix, ...options })] })
  class AppModule {}
  const started = now();
  try {
    const app = await NestFactory.createApplicationContext(AppModule, {
      logger: logs,
      abortOnError: false,
    });
    apps.push(app);
    return { app, logs, took: now() - started };
  } catch (error) {
    return { error, logs, took: now() - started };
  }
}

/** Resolves what `promise` rejected with, and how long that took. */
async function failure(promise: Promise<unknown>): Promise<{ error: unknown; after: number }> {
  const started = now();
  try {
    await promise;
  } catch (error) {
    return { error, after: now() - started };
  }
  throw new Error('expected a rejection');
}

/** A port on 127.0.0.1 nothing listens on: connections are refused at once. */
let refusedUrl: string;
let refusedAddress: string;
let server: RedisServer;
let admin: Redis;

beforeAll(async () => {
  const port = await freePort();
  refusedUrl = `redis://127.0.0.1:${port}`;
  refusedAddress = `127.0.0.1:${port}`;
  server = await startRedis();
  admin = new Redis(server.url);
});

afterEach(async () => {
  await Promise.all(apps.splice(0).map((app) => app.close()));
});

afterAll(async () => {
  admin?.disconnect();
  await closeAllProxies();
  await stopAllRedis();
});

describe('a healthy Redis', () => {
  it('logs one line naming the address and that Redis answered, and no warning', async () => {
    const { app, logs, error } = await boot({ redis: server.url });
    expect(error).toBeUndefined();
    expect(app).toBeDefined();
    const lines = logs.of('log', `127.0.0.1:${server.port}`);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/answered/);
    expect(logs.of('warn')).toEqual([]);
  });

  it('leaves no key behind (the probe lock and its fence counter are gone)', async () => {
    await boot({ redis: server.url });
    await boot({ redis: server.url, fair: true });
    expect(await admin.keys(`${prefix}*`)).toEqual([]);
  });

  it('warns when maxmemory-policy can evict keys with a TTL, naming noeviction', async () => {
    const evicting = await startRedis({ args: ['--maxmemory-policy', 'volatile-lru'] });
    const { logs } = await boot({ redis: evicting.url });
    expect(logs.of('log', /answered/)).toHaveLength(1);
    const warnings = logs.of('warn', /maxmemory-policy/);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(new RegExp(`127\\.0\\.0\\.1:${evicting.port}`));
    expect(warnings[0]).toMatch(/volatile-lru/);
    expect(warnings[0]).toMatch(/noeviction/);
    await evicting.stop();
  });

  it('is skipped with startupCheck: off', async () => {
    const { logs, error } = await boot({ redis: server.url, startupCheck: 'off' });
    expect(error).toBeUndefined();
    expect(logs.of('log', /answered/)).toEqual([]);
  });
});

describe('keys of the 0.1.0 layout under the prefix', () => {
  it("refuses to start while a 0.1.0 read lock's readers exist beside their lock key, naming it and how to drain", async () => {
    const legacy = `${prefix}{report:7}:readers`;
    // Control: the same prefix without the old key boots (and so would the other kinds' keys).
    await admin.set(`${prefix}{report:8}`, 'a mutex holder');
    expect((await boot({ redis: server.url })).error).toBeUndefined();
    await admin.zadd(legacy, Date.now() + 60_000, 'a 0.1.0 reader');
    try {
      const { error, app } = await boot({ redis: server.url });
      expect(app).toBeUndefined();
      expect(error).toBeInstanceOf(RedisLockConfigError);
      expect((error as Error).message).toContain(legacy);
      expect((error as Error).message).toMatch(/Stop every 0\.1\.0 instance/);
      // 'warn' starts, and says why lock calls are unsafe beside those readers.
      const warned = await boot({ redis: server.url, startupCheck: 'warn' });
      expect(warned.error).toBeUndefined();
      expect(warned.logs.of('warn', legacy)).toHaveLength(1);
    } finally {
      await admin.del(legacy, `${prefix}{report:8}`);
    }
  });

  it("refuses to start while a 0.1.0 semaphore's permits exist beside their lock key, not for this version's companions", async () => {
    const legacy = `${prefix}{export:3}:permits`;
    // Control: this version's semaphore keys (the permits under the lock name, a string limit,
    // a hash of records, a fair queue under {key}:permits:*) and unrelated keys named like the
    // old set but of another type boot.
    const current = `${prefix}{export:4}`;
    await admin.zadd(current, Date.now() + 60_000, 'a permit');
    await admin.set(`${current}:permits:limit`, '2');
    await admin.hset(`${current}:permits:holders`, 'a permit', '0 x');
    await admin.zadd(`${current}:permits:queue`, 1, 'a waiter');
    await admin.set(`${prefix}{export:5}:permits`, 'an application string');
    const companions = ['limit', 'holders', 'queue'].map((name) => `${current}:permits:${name}`);
    try {
      expect((await boot({ redis: server.url })).error).toBeUndefined();
      await admin.zadd(legacy, Date.now() + 60_000, 'a 0.1.0 permit');
      const { error, app } = await boot({ redis: server.url });
      expect(app).toBeUndefined();
      expect(error).toBeInstanceOf(RedisLockConfigError);
      expect((error as Error).message).toContain(legacy);
      expect((error as Error).message).toMatch(/permits of a semaphore/);
      expect((error as Error).message).toMatch(/Stop every 0\.1\.0 instance/);
    } finally {
      await admin.del(legacy, current, ...companions, `${prefix}{export:5}:permits`);
    }
  });

  it('fails the bootstrap within commandTimeout when the scan for such keys goes unanswered', async () => {
    const proxy = await startTcpProxy(server.port);
    // Control: the same path through the proxy, answered, boots.
    expect((await boot({ redis: proxy.url, commandTimeout: 300 })).error).toBeUndefined();
    void proxy.dropReplyTo((args) => args[0]?.toLowerCase() === 'scan', 'stall');
    // Bounded here too: without a bound on each SCAN the bootstrap would hang for good.
    const booted = await Promise.race([
      boot({ redis: proxy.url, commandTimeout: 300 }),
      new Promise<'hung'>((resolve) => setTimeout(() => resolve('hung'), 20_000).unref()),
    ]);
    expect(booted).not.toBe('hung');
    const { error, took } = booted as Booted;
    expect(error).toBeInstanceOf(RedisUnavailableError);
    // Each attempt times out; the check retries as it does for any Redis out of reach.
    expect((error as Error).message).toMatch(/did not answer the startup check within 300 ms/);
    expect(took).toBeLessThan(15_000);
  });
});

describe('Redlock', () => {
  it('names every node, warns about one that is down, and still reports the quorum answered', async () => {
    const second = await startRedis();
    const nodes = [server.url, second.url, refusedUrl];
    // restartGrace 0: these nodes just started, and would not vote for the probe lock yet.
    const { logs, error } = await boot({ redlock: { nodes, restartGrace: 0 } });
    expect(error).toBeUndefined();
    const lines = logs.of('log', /answered/);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/Redlock over 3 nodes/);
    for (const url of nodes) expect(lines[0]).toContain(new URL(url).host);
    const warnings = logs.of('warn', refusedAddress);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/refused/);
    await second.stop();
  });
});

describe('nothing listening (connection refused)', () => {
  const commandTimeout = 4_000;

  it('fails the bootstrap by default, after bounded retries, naming the address and the cause', async () => {
    const { app, logs, error } = await boot({ redis: refusedUrl, commandTimeout });
    expect(app).toBeUndefined();
    expect(error).toBeInstanceOf(RedisUnavailableError);
    expect((error as Error).message).toContain(refusedAddress);
    expect((error as Error).message).toMatch(/refused/i);
    expect((error as Error).message).toMatch(/after 4 attempts/);
    expect((error as Error).message).toMatch(/startupCheck: 'warn'/);
    // Each failed attempt but the last says when the next one comes.
    const retries = logs.of('warn', /attempt \d of 4/);
    expect(retries).toHaveLength(3);
    expect(retries[0]).toContain(refusedAddress);
  });

  it('boots when Redis comes up during the retries', async () => {
    const port = Number(new URL(refusedUrl).port);
    let late: Promise<RedisServer> | undefined;
    const logs = new CapturingLogger();
    const warn = logs.warn.bind(logs);
    // The first failed attempt starts the server a later attempt reaches.
    logs.warn = (message: unknown) => {
      warn(message);
      if (!late && /attempt 1 of 4/.test(String(message))) late = startRedis({ port });
    };
    @Module({ imports: [RedisLockModule.forRoot({ prefix, redis: refusedUrl })] })
    class LateModule {}
    try {
      const app = await NestFactory.createApplicationContext(LateModule, { logger: logs });
      apps.push(app);
      expect(logs.of('log', /answered/)).toHaveLength(1);
    } finally {
      await Promise.all(apps.splice(0).map((app) => app.close()));
      await (await late)?.stop();
    }
  });

  it("starts with startupCheck: 'warn', and warns naming the address and the refusal", async () => {
    const { app, logs, error } = await boot({
      redis: refusedUrl,
      commandTimeout,
      startupCheck: 'warn',
    });
    expect(error).toBeUndefined();
    expect(app).toBeDefined();
    const warnings = logs.of('warn', refusedAddress);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/refused/i);
    expect(logs.of('log', /answered/)).toEqual([]);
  });

  it("fails the bootstrap with startupCheck: 'fail', with the refusal as cause", async () => {
    const { error, took } = await boot({
      redis: refusedUrl,
      commandTimeout,
      startupCheck: 'fail',
      startupRetries: 0,
    });
    expect(error).toBeInstanceOf(RedisUnavailableError);
    expect((error as Error).message).toContain(refusedAddress);
    expect((error as Error).message).toMatch(/refused/i);
    expect(((error as Error).cause as NodeJS.ErrnoException).code).toBe('ECONNREFUSED');
    expect(took).toBeLessThan(commandTimeout);
  });

  it('fails lock calls at once (not after commandTimeout or wait) with the refusal as cause', async () => {
    const { app } = await boot({ redis: refusedUrl, commandTimeout, startupCheck: 'warn' });
    const locks = app!.get(LockService);
    for (const call of [
      locks.acquire('k', { wait: 3_000 }),
      locks.tryAcquire('k'),
      locks.isLocked('k'),
    ]) {
      const { error, after } = await failure(call);
      expect(error).toBeInstanceOf(RedisUnavailableError);
      expect((error as Error).message).toContain(refusedAddress);
      expect((error as Error).message).toMatch(/refused/i);
      expect(((error as Error).cause as NodeJS.ErrnoException).code).toBe('ECONNREFUSED');
      expect(after).toBeLessThan(commandTimeout / 2);
    }
  });

  it('fails a call made before the first connection error arrived, as soon as it does', async () => {
    const locks = new LockService({ redis: refusedUrl, prefix, commandTimeout });
    try {
      // Sent while ioredis is still connecting: it waits in ioredis' offline queue.
      const { error, after } = await failure(locks.acquire('k', { wait: 3_000 }));
      expect(error).toBeInstanceOf(RedisUnavailableError);
      expect(((error as Error).cause as NodeJS.ErrnoException).code).toBe('ECONNREFUSED');
      expect(after).toBeLessThan(commandTimeout / 2);
    } finally {
      const started = now();
      await locks.close();
      expect(now() - started).toBeLessThan(commandTimeout);
    }
  });

  it('closes the app promptly after lock calls failed', async () => {
    const { app } = await boot({ redis: refusedUrl, commandTimeout: 2_000, startupCheck: 'warn' });
    const locks = app!.get(LockService);
    await failure(locks.acquire('k'));
    apps.splice(apps.indexOf(app!), 1);
    const started = now();
    await app!.close();
    // Before: ~4 s (a clean-up waited up to 2 × commandTimeout for a command queued offline).
    expect(now() - started).toBeLessThan(2_000);
  });
});

describe('a wrong password', () => {
  let secured: RedisServer;
  const password = 'right-horse-battery';

  beforeAll(async () => {
    secured = await startRedis();
    const setup = new Redis(secured.url);
    // The same as `--requirepass`; set after start because the harness' readiness PING has no AUTH.
    await setup.config('SET', 'requirepass', password);
    setup.disconnect();
  });

  afterAll(() => secured?.stop());

  it('warns with WRONGPASS and the address, never the password', async () => {
    const { logs, error } = await boot({
      redis: `redis://:wrong@127.0.0.1:${secured.port}`,
      startupCheck: 'warn',
    });
    expect(error).toBeUndefined();
    const warnings = logs.of('warn', `127.0.0.1:${secured.port}`);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/WRONGPASS/);
    expect(logs.lines.map((line) => line.message).join('\n')).not.toContain('wrong@');
  });

  it('warns with NOAUTH when no password is given', async () => {
    const { logs } = await boot({ redis: secured.url, startupCheck: 'warn' });
    expect(logs.of('warn', /NOAUTH/)).toHaveLength(1);
  });

  it('fails lock calls at once with RedisUnavailableError whose cause is WRONGPASS', async () => {
    const commandTimeout = 4_000;
    const { app } = await boot({
      redis: `redis://:wrong@127.0.0.1:${secured.port}`,
      commandTimeout,
      startupCheck: 'warn',
    });
    const { error, after } = await failure(app!.get(LockService).acquire('k', { wait: 3_000 }));
    expect(error).toBeInstanceOf(RedisUnavailableError);
    expect((error as Error).message).toMatch(/WRONGPASS/);
    expect(((error as Error).cause as Error).message).toMatch(/^WRONGPASS/);
    expect(after).toBeLessThan(commandTimeout / 2);
  });

  it('fails the bootstrap by default at once, with no retry: a wrong password stays wrong', async () => {
    const { error, logs } = await boot({ redis: `redis://:wrong@127.0.0.1:${secured.port}` });
    expect(error).toBeInstanceOf(RedisUnavailableError);
    expect((error as Error).message).toMatch(/WRONGPASS/);
    expect(logs.of('warn', /attempt/)).toEqual([]);
  });

  it('logs the address without the password once the right one is given', async () => {
    const { logs } = await boot({ redis: `redis://:${password}@127.0.0.1:${secured.port}` });
    expect(logs.of('log', /answered/)).toHaveLength(1);
    expect(logs.lines.map((line) => line.message).join('\n')).not.toContain(password);
  });
});

describe('an ACL user without the lock commands', () => {
  beforeAll(async () => {
    await admin.call('ACL', 'SETUSER', 'no-evalsha', 'on', '>pw', '~*', '&*', '+@all', '-evalsha');
    await admin.call('ACL', 'SETUSER', 'no-publish', 'on', '>pw', '~*', '&*', '+@all', '-publish');
  });

  it.each([
    ['no-evalsha', /evalsha/i],
    ['no-publish', /publish/i],
  ])('warns for user %s that its ACL forbids a lock command, naming it', async (user, command) => {
    const { logs, error } = await boot({
      redis: `redis://${user}:pw@127.0.0.1:${server.port}`,
      startupCheck: 'warn',
    });
    expect(error).toBeUndefined();
    const warnings = logs.of('warn', `127.0.0.1:${server.port}`);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/ACL/);
    expect(warnings[0]).toMatch(command);
  });

  it("fails the bootstrap with startupCheck: 'fail' and closes its connections", async () => {
    const name = `startup-check-${process.pid}`;
    const { error } = await boot({
      redis: {
        host: '127.0.0.1',
        port: server.port,
        username: 'no-evalsha',
        password: 'pw',
        connectionName: name,
      },
      startupCheck: 'fail',
    });
    expect(error).toBeInstanceOf(RedisCommandError);
    expect((error as RedisCommandError).code).toBe('NOPERM');
    const clients = String(await admin.call('CLIENT', 'LIST'));
    expect(clients).not.toContain(`name=${name}`);
  });
});
