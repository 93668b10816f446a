/**
 * A busy lock is routine traffic: its 409 is logged at `verbose` by default (the lowest level;
 * an app that leaves verbose out of its logger's levels drops it), at the level `busyLogLevel`
 * names, or not at all with `busyLogLevel: false`. Other lock failures keep their levels.
 */
import { Controller, Logger, Param, Post, type INestApplication } from '@nestjs/common';
import type Redis from 'ioredis';
import request from 'supertest';
import { Locked, LockService, type RedisLockModuleOptions } from 'nestjs-redis-lock';
import { deleteKeys, redisClient } from '../support/shared-redis';
import { uniquePrefix } from '../support/unique-prefix';
import { createDecoratorApp } from './decorator-app';

@Controller('orders')
class OrdersController {
  constructor(private readonly locks: LockService) {}

  @Post(':userId')
  @Locked('order:<userId>')
  async place(@Param('userId') userId: string): Promise<string> {
    return userId;
  }

  @Post(':userId/manual')
  manual(@Param('userId') userId: string) {
    return this.locks.withLock(`order:${userId}`, () => userId);
  }
}

const LEVELS = ['log', 'warn', 'error', 'debug', 'verbose'] as const;
const prefix = uniquePrefix('busy-log-level');
let redis: Redis;
beforeAll(() => (redis = redisClient()));
afterAll(async () => {
  await deleteKeys(redis, prefix);
  await redis.quit();
});

/** The levels of the lines logged while a route and a withLock answer a busy lock. */
async function busyLines(lock: Omit<RedisLockModuleOptions, 'prefix'> = {}): Promise<string[]> {
  const app: INestApplication = await createDecoratorApp({
    prefix,
    controllers: [OrdersController],
    lock,
  });
  const lines: string[] = [];
  const spies = LEVELS.map((level) =>
    jest.spyOn(Logger.prototype, level).mockImplementation((...args: unknown[]) => {
      const [message] = args;
      if (String(message).includes('order:u1')) lines.push(level);
    }),
  );
  const held = await app.get(LockService).acquire('order:u1');
  try {
    await request(app.getHttpServer()).post('/orders/u1').expect(409);
    await request(app.getHttpServer()).post('/orders/u1/manual').expect(409);
  } finally {
    spies.forEach((spy) => spy.mockRestore());
    await held.release();
    await app.close();
  }
  return lines;
}

it('logs a busy 409 at verbose by default', async () => {
  expect(await busyLines()).toEqual(['verbose', 'verbose']);
});

it('logs it at the level busyLogLevel names', async () => {
  expect(await busyLines({ busyLogLevel: 'log' })).toEqual(['log', 'log']);
});

it('does not log it with busyLogLevel: false', async () => {
  expect(await busyLines({ busyLogLevel: false })).toEqual([]);
});
