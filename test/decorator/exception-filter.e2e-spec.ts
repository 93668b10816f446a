/**
 * `LockExceptionFilter`: lock failures thrown by services during a request (a busy `@Locked`
 * provider method, a `withLock`) answer like `@Locked` routes do, instead of Nest's 500 — on
 * Express and on Fastify.
 */
import { Controller, Injectable, Logger, Param, Post, type INestApplication } from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import type Redis from 'ioredis';
import request from 'supertest';
import { LockExceptionFilter, LockService, Locked } from 'nestjs-redis-lock';
import { deleteKeys, redisClient } from '../support/shared-redis';
import { uniquePrefix } from '../support/unique-prefix';
import { createDecoratorApp } from './decorator-app';

@Injectable()
class OrderService {
  @Locked('order:<userId>')
  async place(userId: string): Promise<{ userId: string }> {
    return { userId };
  }
}

@Controller('orders')
class OrdersController {
  constructor(
    private readonly orders: OrderService,
    private readonly locks: LockService,
  ) {}

  @Post(':userId')
  place(@Param('userId') userId: string) {
    return this.orders.place(userId);
  }

  @Post(':userId/manual')
  manual(@Param('userId') userId: string) {
    return this.locks.withLock(`order:${userId}`, () => ({ userId }));
  }

  @Post('bad/key')
  badKey() {
    return this.orders.place('');
  }
}

describe.each([
  ['express', false],
  ['fastify', true],
] as const)('LockExceptionFilter (APP_FILTER) on %s', (platform, fastify) => {
  const prefix = uniquePrefix(`exception-filter-${platform}`);
  let app: INestApplication;
  let redis: Redis;

  beforeAll(async () => {
    redis = redisClient();
    app = await createDecoratorApp({
      prefix,
      controllers: [OrdersController],
      providers: [OrderService, { provide: APP_FILTER, useClass: LockExceptionFilter }] as never,
      fastify,
    });
  });

  afterAll(async () => {
    await app.close();
    await deleteKeys(redis, prefix);
    redis.disconnect();
  });

  it('answers a busy @Locked service method with 409, Retry-After and a body without the key', async () => {
    const locks = app.get(LockService);
    const held = await locks.acquire('order:u1');
    try {
      for (const path of ['/orders/u1', '/orders/u1/manual']) {
        const response = await request(app.getHttpServer()).post(path);
        expect(response.status).toBe(409);
        expect(response.headers['retry-after']).toBe('1');
        expect(response.body).toEqual({
          statusCode: 409,
          error: 'Conflict',
          message: 'Another request is working on the same resource. Try again shortly.',
        });
      }
    } finally {
      await held.release();
    }
    await request(app.getHttpServer()).post('/orders/u1').expect(201, { userId: 'u1' });
  });

  it('answers a bad key from a service method with 400, and logs the reason', async () => {
    const warned = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    try {
      const response = await request(app.getHttpServer()).post('/orders/bad/key');
      expect(response.status).toBe(400);
      expect(response.body).toEqual({
        statusCode: 400,
        error: 'Bad Request',
        message: 'The request is missing a value this operation needs, or a value is invalid.',
      });
      expect(String(warned.mock.calls[0]?.[0])).toContain('placeholder <userId>');
    } finally {
      warned.mockRestore();
    }
  });
});
