/**
 * The SSE and HTTP answers of `transport-failures.e2e-spec.ts`, through a real Fastify server: a
 * busy `@Sse()` open gets an error event (or a 409 before the headers went out) and its stream
 * ends; a busy route gets 409 with `Retry-After`; a skipped `@Sse()` open ends without an event.
 * No failure becomes an unhandled rejection (`fail-on-unhandled.ts`).
 */
import type { INestApplication } from '@nestjs/common';
import type Redis from 'ioredis';
import type { AddressInfo } from 'node:net';
import { LockService, type LockHandle } from 'nestjs-redis-lock';
import { deleteKeys, redisClient } from '../support/shared-redis';
import { uniquePrefix } from '../support/unique-prefix';
import { createDecoratorApp } from './decorator-app';
import { httpAnswer, HttpRoutes, runs } from './fixtures/transport-app';
import { sseEvents } from './fixtures/sse-events';

/** What callers are told of a busy lock by default: no key, no advice. */
const BUSY = 'Another request is working on the same resource. Try again shortly.';

describe('lock failures on a Fastify server', () => {
  const prefix = uniquePrefix('transport-fastify');
  let app: INestApplication;
  let port: number;
  let redis: Redis;
  let held: LockHandle[] = [];

  beforeAll(async () => {
    redis = redisClient();
    app = await createDecoratorApp({ prefix, controllers: [HttpRoutes], fastify: true });
    port = (app.getHttpServer().address() as AddressInfo).port;
    const locks = app.get(LockService);
    held = [
      await locks.acquire('sse:busy'),
      await locks.acquire('sse:skip-busy'),
      await locks.acquire('order:busy'),
    ];
  });

  afterAll(async () => {
    await Promise.all(held.map((lock) => lock.release()));
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('answers a busy SSE open that waited past the headers with an error event, then ends it', async () => {
    const before = runs.get('sse') ?? 0;
    const answer = await httpAnswer(port, 'GET', '/t/events?id=busy');
    expect(answer.status).toBe(200);
    expect(sseEvents(answer.body)).toEqual([{ event: 'error', data: BUSY }]);
    expect(runs.get('sse') ?? 0).toBe(before);
  });

  it('answers fail-fast SSE opens with 409 or an error event, and always ends the stream', async () => {
    const answers = await Promise.all(
      Array.from({ length: 10 }, () => httpAnswer(port, 'GET', '/t/events-fast?id=busy')),
    );
    for (const answer of answers) {
      if (answer.status === 409) {
        expect(answer.headers['retry-after']).toBe('1');
      } else {
        expect(answer.status).toBe(200);
        expect(sseEvents(answer.body)).toEqual([{ event: 'error', data: BUSY }]);
      }
    }
  });

  it('ends a skipped SSE open without an event', async () => {
    const answer = await httpAnswer(port, 'GET', '/t/events-skip?id=skip-busy');
    expect(answer.status).toBe(200);
    expect(sseEvents(answer.body)).toEqual([]);
  });

  it('answers a busy route with 409 and Retry-After', async () => {
    const before = runs.get('http') ?? 0;
    const answer = await httpAnswer(port, 'POST', '/t/orders/busy');
    expect(answer.status).toBe(409);
    expect(answer.headers['retry-after']).toBe('1');
    expect(runs.get('http') ?? 0).toBe(before);
  });
});
