/**
 * Every transport `@Locked` serves (Express HTTP, SSE, TCP microservice message and event,
 * socket.io gateway) through every way taking the lock can fail — busy, bad key, Redis out of
 * reach; the busy and skipped SSE and route answers on Express and Fastify: each caller gets an answer it can act on, the handler does not run, and no failure
 * becomes an unhandled rejection (`test/support/fail-on-unhandled.ts` fails the test that saw one;
 * outside jest, one would exit the process).
 */
import { Logger, type INestApplication } from '@nestjs/common';
import type Redis from 'ioredis';
import type { AddressInfo } from 'node:net';
import { LockService, type LockHandle } from 'nestjs-redis-lock';
import { freePort } from '../support/free-port';
import { deleteKeys, redisClient, SHARED_REDIS_URL } from '../support/shared-redis';
import { sleep, waitFor } from '../support/time';
import { uniquePrefix } from '../support/unique-prefix';
import { createDecoratorApp } from './decorator-app';
import { sseEvents } from './fixtures/sse-events';
import {
  httpAnswer,
  HttpRoutes,
  runs,
  startTransportApp,
  type TransportApp,
} from './fixtures/transport-app';

/** What callers are told of a busy lock by default: no key, no advice. */
const BUSY = 'Another request is working on the same resource. Try again shortly.';

/** The SSE and route answers below run once per HTTP platform Nest ships an adapter for. */
const PLATFORMS = [
  ['express', false],
  ['fastify', true],
] as const;

describe.each(PLATFORMS)('a busy @Sse() route (%s)', (platform, fastify) => {
  const prefix = uniquePrefix(`transport-sse-busy-${platform}`);
  let app: INestApplication;
  let port: number;
  let redis: Redis;
  let held: LockHandle[] = [];

  beforeAll(async () => {
    redis = redisClient();
    app = await createDecoratorApp({ prefix, controllers: [HttpRoutes], listen: true, fastify });
    port = (app.getHttpServer().address() as AddressInfo).port;
    const locks = app.get(LockService);
    held = [await locks.acquire('sse:busy'), await locks.acquire('order:busy')];
  });

  afterAll(async () => {
    await Promise.all(held.map((lock) => lock.release()));
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('answers an open that waited past the SSE headers with an error event, then ends the stream', async () => {
    // `wait: 300`: Nest has sent the SSE headers long before the wait runs out.
    const before = runs.get('sse') ?? 0;
    const answer = await httpAnswer(port, 'GET', '/t/events?id=busy');
    expect(answer.status).toBe(200);
    expect(answer.headers['content-type']).toContain('text/event-stream');
    const events = sseEvents(answer.body);
    expect(events).toEqual([{ event: 'error', data: BUSY }]);
    expect(runs.get('sse') ?? 0).toBe(before);
  });

  it('answers fail-fast opens with 409 or an error event, and always ends the stream', async () => {
    // `wait: 0`: whether Redis answers before the SSE headers go out is a race; both answers
    // are fine, a stream left open (or a crash) is not.
    const answers = await Promise.all(
      Array.from({ length: 10 }, () => httpAnswer(port, 'GET', '/t/events-fast?id=busy')),
    );
    for (const answer of answers) {
      if (answer.status === 409) {
        expect(answer.headers['retry-after']).toBe('1');
        expect(JSON.parse(answer.body)).toEqual({
          statusCode: 409,
          error: 'Conflict',
          message: BUSY,
        });
      } else {
        expect(answer.status).toBe(200);
        expect(sseEvents(answer.body)).toEqual([{ event: 'error', data: BUSY }]);
      }
    }
  });

  it('answers a busy route with 409 and Retry-After', async () => {
    const before = runs.get('http') ?? 0;
    const answer = await httpAnswer(port, 'POST', '/t/orders/busy');
    expect(answer.status).toBe(409);
    expect(answer.headers['retry-after']).toBe('1');
    expect(runs.get('http') ?? 0).toBe(before);
  });
});

describe.each(PLATFORMS)('a skipped @Sse() route (%s)', (platform, fastify) => {
  const prefix = uniquePrefix(`transport-sse-skip-${platform}`);
  let app: INestApplication;
  let port: number;
  let redis: Redis;

  beforeAll(async () => {
    redis = redisClient();
    app = await createDecoratorApp({ prefix, controllers: [HttpRoutes], listen: true, fastify });
    port = (app.getHttpServer().address() as AddressInfo).port;
  });

  afterAll(async () => {
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('streams when free, and ends an empty stream when skipped as busy', async () => {
    const free = await httpAnswer(port, 'GET', '/t/events-skip?id=skip-free');
    expect(sseEvents(free.body).map((event) => event.data)).toEqual(['{"n":0}', '{"n":1}']);

    const held = await app.get(LockService).acquire('sse:skip-busy');
    try {
      const before = runs.get('sse') ?? 0;
      const skipped = await httpAnswer(port, 'GET', '/t/events-skip?id=skip-busy');
      // Ended without an event (whether Nest had sent the SSE headers yet is a race).
      expect(skipped.status).toBe(200);
      expect(sseEvents(skipped.body)).toEqual([]);
      expect(runs.get('sse') ?? 0).toBe(before);
    } finally {
      await held.release();
    }
  });
});

/** What each transport's caller gets, per failure mode. */
const expected = {
  busy: {
    http: { status: 409 },
    sse: { event: 'error', text: BUSY },
    error: 'LockNotAcquiredError',
  },
  badKey: { http: { status: 400 }, sse: { status: 400 }, error: 'LockKeyError' },
  // A Redis that has refused every connection since startup fails the call at once, before the
  // stream opens: the SSE client gets the status, as for a bad key.
  unreachable: {
    http: { status: 503 },
    sse: { status: 503 },
    error: 'RedisUnavailableError',
  },
} as const;

describe.each([
  ['busy', 'u-busy'],
  ['badKey', undefined],
  ['unreachable', 'u-down'],
] as const)('every transport when the lock fails: %s', (mode, userId) => {
  const prefix = uniquePrefix(`transport-${mode}`);
  let subject: TransportApp;
  let redis: Redis;
  let held: LockHandle | undefined;
  let heldSse: LockHandle | undefined;
  let logged: jest.SpyInstance;
  const want = expected[mode];
  const payload = userId === undefined ? { other: 1 } : { userId };
  const path = userId === undefined ? '' : userId;

  beforeAll(async () => {
    redis = redisClient();
    const redisUrl =
      mode === 'unreachable' ? `redis://127.0.0.1:${await freePort()}` : SHARED_REDIS_URL;
    // 'warn': the app starts without Redis, to answer while it is out of reach.
    subject = await startTransportApp({
      redis: redisUrl,
      prefix,
      commandTimeout: 300,
      startupCheck: 'warn',
    });
    if (mode === 'busy') {
      const locks = subject.app.get(LockService);
      held = await locks.acquire(`order:${userId}`);
      heldSse = await locks.acquire(`sse:${userId}`);
    }
  });

  beforeEach(() => {
    logged = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
  });

  afterEach(() => logged.mockRestore());

  afterAll(async () => {
    await held?.release();
    await heldSse?.release(); // else closing the app waits its shutdown grace for it
    await subject?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
    // A client that never connected keeps a 200 ms disconnect timer; let it run out here.
    if (mode === 'unreachable') await sleep(250);
  });

  it('HTTP route', async () => {
    const before = runs.get('http') ?? 0;
    const answer = await subject.http('POST', `/t/orders/${path}`);
    // Without a user id the path is another route: the bad key is tested by SSE and payloads.
    if (userId !== undefined) expect(answer.status).toBe(want.http.status);
    expect(runs.get('http') ?? 0).toBe(before);
  });

  it('SSE stream', async () => {
    const before = runs.get('sse') ?? 0;
    const query = userId === undefined ? '' : `?id=${userId}`;
    const answer = await subject.http('GET', `/t/events${query}`);
    if ('status' in want.sse) {
      expect(answer.status).toBe(want.sse.status);
    } else {
      expect(sseEvents(answer.body)).toEqual([{ event: want.sse.event, data: want.sse.text }]);
    }
    expect(runs.get('sse') ?? 0).toBe(before);
  });

  it('TCP message', async () => {
    const before = runs.get('message') ?? 0;
    const answer = await subject.send('order.create', payload);
    expect(answer).toMatchObject({ error: { status: 'error', error: want.error } });
    expect(runs.get('message') ?? 0).toBe(before);
  });

  it('TCP event: logged with its reason', async () => {
    const before = runs.get('event') ?? 0;
    await subject.emit('order.paid', payload);
    await waitFor(() => logged.mock.calls.length > 0, 5_000);
    const line = String(logged.mock.calls[0][0]);
    expect(line).toContain('order.paid');
    expect(line).toContain(want.error);
    if (userId !== undefined) expect(line).toContain(`order:${userId}`);
    expect(runs.get('event') ?? 0).toBe(before);
  });

  it('socket.io gateway', async () => {
    const before = runs.get('ws') ?? 0;
    const answer = await subject.wsSend('order.create', payload);
    expect(answer).toMatchObject({ exception: { status: 'error', error: want.error } });
    expect(runs.get('ws') ?? 0).toBe(before);
  });
});
