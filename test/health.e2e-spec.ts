/**
 * The @nestjs/terminus indicator in a real Nest app with a real `HealthCheckService`, on a private
 * redis-server: up with its details while a lock is held and renewed; down, with the reason and
 * the renewal failures counted, while Redis is paused (SIGSTOP: connections stay open, nothing
 * answers); up again once it resumes, the lock kept.
 */
import { Controller, Get, Module, type INestApplication } from '@nestjs/common';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import { Test } from '@nestjs/testing';
import { LockService, RedisLockModule, type LockHandle } from 'nestjs-redis-lock';
import request from 'supertest';
import { LockHealthIndicator, type LockHealthDetails } from '../lib/health';
import { CONNECT_BUDGET } from './support/lock-services';
import { startRedis, stopAllRedis, type RedisServer } from './support/redis-server';
import { uniquePrefix } from './support/unique-prefix';
import { sleep, waitFor } from './support/time';

/** Renewed every second; a renewal sent to a paused Redis fails after `COMMAND_TIMEOUT`. */
const TTL = 3_000;
const COMMAND_TIMEOUT = 300;
/** The `maxLag` of GET /health/strict. */
const STRICT_LAG = 100;

@Controller('health')
class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly locks: LockHealthIndicator,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    return this.health.check([() => this.locks.isHealthy('locks')]);
  }

  @Get('strict')
  @HealthCheck()
  strict() {
    return this.health.check([() => this.locks.isHealthy('locks', { maxLag: STRICT_LAG })]);
  }
}

let server: RedisServer;
let app: INestApplication;
let lock: LockHandle | undefined;

/** GET /health: the HTTP status and the indicator's entry (from `details`, up or down). */
async function check(path = '/health') {
  const response = await request(app.getHttpServer()).get(path);
  const body = response.body as { details: { locks: LockHealthDetails & { status: string } } };
  return { http: response.status, locks: body.details.locks };
}

beforeAll(async () => {
  server = await startRedis();
  @Module({
    imports: [
      TerminusModule.forRoot({ logger: false }),
      RedisLockModule.forRoot({
        redis: server.url,
        prefix: uniquePrefix('health'),
        ttl: TTL,
        commandTimeout: COMMAND_TIMEOUT,
        startupCheck: 'off',
      }),
    ],
    controllers: [HealthController],
    providers: [LockHealthIndicator],
  })
  class HealthAppModule {}
  const moduleRef = await Test.createTestingModule({ imports: [HealthAppModule] }).compile();
  app = moduleRef.createNestApplication({ logger: false });
  await app.init();
});

afterAll(async () => {
  if (server?.running) server.resume();
  await lock?.release().catch(() => undefined);
  await app?.close();
  await stopAllRedis();
});

it('is up while a lock is held and renewed, with latency, held count and lag', async () => {
  lock = await app.get(LockService).acquire('order:1', CONNECT_BUDGET); // startupCheck is off
  // Wait for a renewal, so the loop has ticked and a batch has succeeded.
  await waitFor(async () => (await check()).locks.renewals.lastRenewalAgoMs !== undefined, 3_000);
  const { http, locks } = await check();
  expect(http).toBe(200);
  expect(locks.status).toBe('up');
  expect(locks.held).toBe(1);
  expect(locks.redis).toEqual({ reachable: true, latencyMs: expect.any(Number) as number });
  expect(locks.redis.latencyMs).toBeLessThan(COMMAND_TIMEOUT);
  expect(locks.renewals).toMatchObject({ running: true, recentFailures: 0, failingInRow: 0 });
  expect(locks.renewals.lagMs).toBeLessThan(250); // well under maxLag (TTL / 6 = 500 ms)
  expect(locks.reasons).toBeUndefined();
  // No lock key in what the endpoint shows.
  expect(JSON.stringify(locks)).not.toContain('order:1');
});

it('is down while Redis is paused, with the reason and the renewal failures counted', async () => {
  expect(lock?.signal.aborted).toBe(false);
  server.pause();
  let down: Awaited<ReturnType<typeof check>> | undefined;
  // A renewal is due within a second (TTL / 3) and fails after COMMAND_TIMEOUT.
  await waitFor(async () => {
    down = await check();
    return down.locks.renewals.recentFailures > 0;
  }, 3_000);
  expect(down?.http).toBe(503);
  expect(down?.locks.status).toBe('down');
  expect(down?.locks.redis.reachable).toBe(false);
  expect(down?.locks.redis.error).toMatch(/did not answer PING within 300 ms/);
  expect(down?.locks.renewals.failingInRow).toBeGreaterThan(0);
  expect(down?.locks.renewals.lastFailure).toMatch(/did not answer renewal/);
  expect(down?.locks.reasons).toEqual([
    expect.stringMatching(/^Redis is unreachable: /),
    expect.stringMatching(/renewal batch\(es\) failed/),
  ]);
});

it('is up again once Redis resumes, the lock kept', async () => {
  server.resume();
  await waitFor(async () => (await check()).http === 200, 5_000);
  const { locks } = await check();
  expect(locks.status).toBe('up');
  expect(locks.held).toBe(1);
  expect(lock?.signal.aborted).toBe(false);
  expect(locks.renewals.failingInRow).toBe(0);
  // The failures still count as recent, and the last one is still shown.
  expect(locks.renewals.recentFailures).toBeGreaterThan(0);
  expect(locks.renewals.lastFailure).toBeDefined();
});

it('is down when the loop runs late past maxLag, and says so', async () => {
  const before = await check('/health/strict');
  expect(before.http).toBe(200);
  // Block the event loop past the next tick's time (ticks come at least every TTL / 3 while a
  // lock is held): that tick runs late by at least the rest of the block.
  const blockUntil = Date.now() + TTL / 3 + 2 * STRICT_LAG;
  while (Date.now() < blockUntil);
  await sleep(20);
  const { http, locks } = await check('/health/strict');
  expect(http).toBe(503);
  expect(locks.renewals.lagMs).toBeGreaterThan(STRICT_LAG);
  expect(locks.reasons).toEqual([
    expect.stringMatching(/^The renewal loop runs \d+ ms late \(maxLag 100 ms\)/),
  ]);
  expect(lock?.signal.aborted).toBe(false);
});
