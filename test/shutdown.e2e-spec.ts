/**
 * Shutdown with locked work still running: `close()` (and Nest's `app.close()`) refuses new
 * locks at once, waits up to `shutdownGrace` for held locks to be released by their work while
 * renewing them, then aborts what is still held (reason 'shutdown', a 'lost' event) and only then
 * releases it. Another holder never gets in while the work still believes it holds the lock.
 */
import {
  Controller,
  Injectable,
  Logger,
  Param,
  Post,
  type INestApplication,
  type OnApplicationShutdown,
} from '@nestjs/common';
import request from 'supertest';
import {
  Locked,
  LockLostError,
  LockService,
  LockServiceClosedError,
  RedisLockConfigError,
  type LockHandle,
} from 'nestjs-redis-lock';
import { createDecoratorApp } from './decorator/decorator-app';
import { onSharedRedis } from './support/lock-services';
import { startRedis, stopAllRedis } from './support/redis-server';
import { closeAllProxies, startTcpProxy } from './support/tcp-proxy';
import { Gate, now, sleep, waitFor } from './support/time';

const { prefix, redis, services, keyOf } = onSharedRedis('shutdown');

/** Polls `tryAcquire` on `other` for `ms`; resolves the handle as soon as one succeeds, else null. */
async function tryDuring(other: LockService, key: string, ms: number): Promise<LockHandle | null> {
  const until = now() + ms;
  do {
    const lock = await other.tryAcquire(key);
    if (lock) return lock;
    await sleep(25);
  } while (now() < until);
  return null;
}

describe('close() with locked work still running', () => {
  it('keeps the lock (renewed past its ttl) until the work releases it, then lets others in', async () => {
    const closing = services.create({ ttl: 500, shutdownGrace: 10_000 });
    const other = services.create();
    const started = new Gate();
    const finish = new Gate();
    let abortedAtEnd: boolean | undefined;
    const work = closing.withLock('job', async (lock) => {
      started.release();
      await finish.opened;
      abortedAtEnd = lock.signal.aborted;
      return 'done';
    });
    await started.opened;
    const closed = closing.close();
    let closeDone = false;
    void closed.then(() => (closeDone = true));

    // Over two leases of 500 ms: the watchdog keeps renewing while close() waits.
    expect(await tryDuring(other, 'job', 1_100)).toBeNull();
    expect(closeDone).toBe(false);
    finish.release();
    await expect(work).resolves.toBe('done');
    expect(abortedAtEnd).toBe(false);
    await closed;
    const next = await other.tryAcquire('job');
    expect(next).not.toBeNull();
    await next!.release();
  });

  it('refuses new acquires during the grace period at once, waiting ones included', async () => {
    const closing = services.create({ shutdownGrace: 10_000 });
    const holder = await closing.acquire('held');
    const blocker = await services.create().acquire('busy');
    const waiting = closing.acquire('busy', { wait: 20_000 }).catch((error: unknown) => error);
    await sleep(50); // the waiter is subscribed and sleeping
    const closed = closing.close();
    const started = now();
    await expect(closing.acquire('fresh')).rejects.toBeInstanceOf(LockServiceClosedError);
    await expect(closing.tryAcquire('fresh')).rejects.toBeInstanceOf(LockServiceClosedError);
    await expect(closing.acquire('fresh', { wait: 20_000 })).rejects.toThrow(/shutting down/);
    expect(await waiting).toBeInstanceOf(LockServiceClosedError);
    expect(now() - started).toBeLessThan(2_000); // not the 20 s wait budget
    expect(holder.isHeld).toBe(true); // still held: its work has not released it
    expect(await holder.release()).toBe(true);
    await closed;
    await blocker.release();
  });

  it('after shutdownGrace aborts the signal (reason shutdown) and emits lost before releasing', async () => {
    const closing = services.create({ shutdownGrace: 300 });
    const other = services.create();
    const events: string[] = [];
    closing.on('lost', (error) => events.push(`lost:${error.reason}`));
    const started = new Gate();
    const stop = new Gate();
    const work = closing.withLock('overrun', async (lock) => {
      lock.signal.addEventListener('abort', () => {
        events.push(`abort:${(lock.signal.reason as LockLostError).reason}`);
        stop.release();
      });
      started.release();
      await stop.opened; // work that only stops when told to
      events.push('work stopped');
    });
    const workOutcome = work.catch((error: unknown) => error);
    await started.opened;
    const waiter = other.acquire('overrun', { wait: 10_000 }).then((lock) => {
      events.push('other acquired');
      return lock;
    });
    await sleep(50); // the other service is waiting
    const closeStarted = now();
    await closing.close();
    const lock = await waiter;
    expect(now() - closeStarted).toBeGreaterThanOrEqual(290); // the grace ran out first
    expect(events.indexOf('abort:shutdown')).toBeGreaterThanOrEqual(0);
    expect(events.indexOf('lost:shutdown')).toBeGreaterThan(events.indexOf('abort:shutdown'));
    expect(events.indexOf('other acquired')).toBeGreaterThan(events.indexOf('lost:shutdown'));
    const outcome = await workOutcome;
    expect(outcome).toBeInstanceOf(LockLostError);
    expect((outcome as LockLostError).reason).toBe('shutdown');
    expect(await lock.release()).toBe(true);
  });

  it('with shutdownGrace 0 aborts held locks at once, then releases them', async () => {
    const closing = services.create({ shutdownGrace: 0 });
    const lock = await closing.acquire('no-grace');
    await closing.close();
    expect(lock.signal.aborted).toBe(true);
    expect((lock.signal.reason as LockLostError).reason).toBe('shutdown');
    expect(await redis.exists(keyOf('no-grace'))).toBe(0);
    expect(await lock.release()).toBe(false);
  });
});

describe('the shutdownGrace option', () => {
  it.each([-1, Number.NaN, Infinity, 2 ** 31, '5000'])('rejects %p at startup', (value) => {
    expect(() => new LockService({ shutdownGrace: value as number })).toThrow(RedisLockConfigError);
  });
});

describe('close() with Redis out of reach', () => {
  afterAll(async () => {
    await closeAllProxies();
    await stopAllRedis();
  });

  it('aborts held work after the grace and returns within grace plus bounded commands', async () => {
    const server = await startRedis();
    const proxy = await startTcpProxy(server.port);
    const commandTimeout = 300;
    const grace = 500;
    const closing = services.create({ redis: proxy.url, commandTimeout, shutdownGrace: grace });
    const lock = await closing.acquire('unreachable', { ttl: 20_000 });
    proxy.blackhole();
    const started = now();
    const closed = closing.close();
    const finished = await Promise.race([
      closed.then(() => true),
      sleep(grace + 4 * commandTimeout + 1_000).then(() => false),
    ]);
    const took = now() - started;
    proxy.heal();
    await closed;
    expect(finished).toBe(true);
    expect(took).toBeLessThan(grace + 3 * commandTimeout + 750);
    expect(lock.signal.aborted).toBe(true);
    expect((lock.signal.reason as LockLostError).reason).toBe('shutdown');
  });
});

describe('app.close() with a @Locked provider method running', () => {
  const started = new Gate();
  const finish = new Gate();
  const log: string[] = [];

  /** Stands for a database client the locked work needs, closed by its own shutdown hook. */
  @Injectable()
  class Database implements OnApplicationShutdown {
    open = true;
    onApplicationShutdown(): void {
      log.push('database closed');
      this.open = false;
    }
  }

  @Injectable()
  class NightlyJob {
    constructor(private readonly db: Database) {}

    @Locked('nightly')
    async run(): Promise<string> {
      started.release();
      await finish.opened;
      log.push(`work ended, database ${this.db.open ? 'open' : 'closed'}`);
      return 'ran';
    }
  }

  @Controller('jobs')
  class JobsController {
    @Post(':id')
    @Locked('job:<id>')
    async start(@Param('id') id: string): Promise<string> {
      return id;
    }
  }

  let app: INestApplication | undefined;
  afterAll(async () => {
    finish.release();
    await app?.close();
  });

  it('waits for the job, lets nobody in meanwhile, and closes the database after it', async () => {
    app = await createDecoratorApp({
      prefix,
      providers: [Database, NightlyJob],
      controllers: [JobsController],
      lock: { shutdownGrace: 10_000 },
      listen: true,
    });
    const server = app.getHttpServer();
    await request(server).post('/jobs/1').expect(201);
    const other = services.create();
    const run = app.get(NightlyJob).run();
    await started.opened;
    const closed = app.close();
    expect(await tryDuring(other, 'nightly', 300)).toBeNull();
    // The HTTP server still answers during the grace; a locked route is refused with a 503,
    // whose reason is logged.
    const warnings: string[] = [];
    const warned = jest
      .spyOn(Logger.prototype, 'warn')
      .mockImplementation((line: unknown) => void warnings.push(String(line)));
    const refused = await request(server).post('/jobs/2');
    warned.mockRestore();
    expect(refused.status).toBe(503);
    expect(refused.body).toEqual({
      statusCode: 503,
      error: 'Service Unavailable',
      message: 'The service is temporarily unavailable. Try again later.',
    });
    expect(warnings).toContainEqual(expect.stringMatching(/answered 503: .*shutting down/));
    finish.release();
    await expect(run).resolves.toBe('ran');
    await closed;
    await waitFor(async () => (await other.isLocked('nightly')) === false, 2_000);
    const next = await other.tryAcquire('nightly');
    expect(next).not.toBeNull();
    await next!.release();
    expect(log).toEqual(['work ended, database open', 'database closed']);
  });
});
