/**
 * `@Locked` with `permits` on an HTTP route: N requests for one tenant run at once, the N+1th
 * gets 409 with Retry-After (the soonest permit lease end, in whole seconds), another tenant is a
 * semaphore of its own, and a bad `permits` fails at class definition.
 */
import { Controller, Param, Post, type INestApplication } from '@nestjs/common';
import type Redis from 'ioredis';
import request from 'supertest';
import { Locked, RedisLockConfigError } from 'nestjs-redis-lock';
import { deleteKeys, redisClient } from '../support/shared-redis';
import { Gate, waitFor } from '../support/time';
import { uniquePrefix } from '../support/unique-prefix';
import { createDecoratorApp } from '../decorator/decorator-app';

const PERMITS = 3;
const gate = new Gate();
let running = 0;

@Controller('exports')
class ExportController {
  @Post(':tenantId')
  @Locked('export:<tenantId>', { permits: PERMITS, ttl: 4_000 })
  async run(@Param('tenantId') tenantId: string): Promise<{ tenantId: string }> {
    running++;
    await gate.opened;
    running--;
    return { tenantId };
  }
}

const prefix = uniquePrefix('sem-route');
let app: INestApplication;
let redis: Redis;

beforeAll(async () => {
  redis = redisClient();
  app = await createDecoratorApp({ prefix, controllers: [ExportController], listen: true });
});

afterAll(async () => {
  gate.release();
  await app?.close();
  await deleteKeys(redis, prefix);
  await redis.quit();
});

describe(`@Locked('export:<tenantId>', { permits: ${PERMITS} }) on a route`, () => {
  it(`runs ${PERMITS} requests for one tenant at once and answers the next with 409 + Retry-After`, async () => {
    const server = app.getHttpServer();
    const inFlight = Array.from({ length: PERMITS }, () =>
      request(server)
        .post('/exports/acme')
        .then((r) => r),
    );
    await waitFor(() => running === PERMITS, 5_000);
    const refused = await request(server).post('/exports/acme');
    expect(refused.status).toBe(409);
    // The soonest permit lease ends within the 4 s ttl: Retry-After in whole seconds.
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(Number(refused.headers['retry-after'])).toBeLessThanOrEqual(4);
    // Another tenant is another semaphore.
    const other = request(server)
      .post('/exports/globex')
      .then((r) => r);
    await waitFor(() => running === PERMITS + 1, 5_000);
    gate.release();
    const answers = await Promise.all([...inFlight, other]);
    expect(answers.map((r) => r.status)).toEqual([201, 201, 201, 201]);
    expect(await redis.exists(`${prefix}{export:acme}`)).toBe(0);
  });

  it('refuses a bad `permits` when the class is defined', () => {
    expect(() => {
      class Bad {
        @Locked('x', { permits: 0 })
        async run(): Promise<void> {}
      }
      return Bad;
    }).toThrow(RedisLockConfigError);
  });
});
