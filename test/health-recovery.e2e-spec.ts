/**
 * Readiness after a Redis outage, on a private redis-server that the test stops and starts again:
 * once Redis answers and no lock this instance holds is at risk, the indicator is up at its next
 * check — not held down for `window` (60 s) by renewal failures of locks that are gone.
 */
import { Controller, Get, Module, type INestApplication } from '@nestjs/common';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import { Test } from '@nestjs/testing';
import { LockService, RedisLockModule } from 'nestjs-redis-lock';
import request from 'supertest';
import { LockHealthIndicator, type LockHealthDetails } from '../lib/health';
import { CONNECT_BUDGET } from './support/lock-services';
import { startRedis, stopAllRedis, type RedisServer } from './support/redis-server';
import { uniquePrefix } from './support/unique-prefix';
import { waitFor } from './support/time';

const TTL = 1_500;
const COMMAND_TIMEOUT = 200;

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
}

let server: RedisServer;
let app: INestApplication;

async function check() {
  const response = await request(app.getHttpServer()).get('/health');
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
        prefix: uniquePrefix('health-recovery'),
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
  await app?.close();
  await stopAllRedis();
});

it('is up as soon as a restarted Redis answers, when the locks its renewals failed for are gone', async () => {
  const lock = await app.get(LockService).acquire('report:1', CONNECT_BUDGET);
  await server.stop();
  // The renewals fail, and the lease runs out: the lock is lost, nothing is held any more.
  await new Promise<void>((lost) => lock.signal.addEventListener('abort', () => lost()));
  await waitFor(async () => (await check()).locks.held === 0, 5_000);
  const down = await check();
  expect(down.http).toBe(503);
  expect(down.locks.renewals.failingInRow).toBeGreaterThan(0);

  await server.restart();
  let answered: Awaited<ReturnType<typeof check>> | undefined;
  await waitFor(async () => {
    answered = await check();
    return answered.locks.redis.reachable;
  }, 10_000);
  // The first check that reaches Redis is up: nothing held, so no lock is at risk.
  expect(answered?.locks).toMatchObject({ status: 'up', held: 0 });
  expect(answered?.http).toBe(200);
  expect(answered?.locks.reasons).toBeUndefined();
  // The failures are still reported, as history.
  expect(answered?.locks.renewals.recentFailures).toBeGreaterThan(0);
  await lock.release().catch(() => undefined);
});
