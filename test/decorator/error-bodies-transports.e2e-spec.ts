/**
 * What microservice, WebSocket and SSE callers are told about a lock failure, over real transports
 * (TCP, socket.io, an Express SSE stream) on real Redis: by default `LockTransportError` data with
 * the class name and a generic message — no key, no Redis reply, no advice — and the detail in the
 * log. `errorDetails: 'detailed'` brings back the key, `retryAfterMs` and the message.
 */
import { Logger } from '@nestjs/common';
import { LockService, type LockHandle } from 'nestjs-redis-lock';
import { startRedis, stopAllRedis } from '../support/redis-server';
import { deleteKeys, redisClient, SHARED_REDIS_URL } from '../support/shared-redis';
import { uniquePrefix } from '../support/unique-prefix';
import { startTransportApp, type TransportApp } from './fixtures/transport-app';

const BUSY = 'Another request is working on the same resource. Try again shortly.';
const UNAVAILABLE = 'The service is temporarily unavailable. Try again later.';
const EMAIL = 'alice@example.com';

/** Every line logged through Nest's `Logger` while the file runs. */
const lines: string[] = [];
let spies: jest.SpyInstance[] = [];
beforeAll(() => {
  spies = (['log', 'warn', 'error', 'debug', 'verbose'] as const).map((level) =>
    jest
      .spyOn(Logger.prototype, level)
      .mockImplementation((...args: unknown[]) => void lines.push(`${level}: ${String(args[0])}`)),
  );
});
afterAll(() => spies.forEach((spy) => spy.mockRestore()));

/** The SSE `data` of a stream's one error event. */
function sseError(body: string): string | undefined {
  const block = body.split('\n\n').find((lines) => lines.split('\n').includes('event: error'));
  return block
    ?.split('\n')
    .find((line) => line.startsWith('data: '))
    ?.slice('data: '.length);
}

describe('a busy lock, by default', () => {
  const prefix = uniquePrefix('error-bodies-busy');
  let subject: TransportApp;
  const held: LockHandle[] = [];

  beforeAll(async () => {
    subject = await startTransportApp({ redis: SHARED_REDIS_URL, prefix });
    const locks = subject.app.get(LockService);
    held.push(await locks.acquire(`order:${EMAIL}`), await locks.acquire(`sse:${EMAIL}`));
  });

  afterAll(async () => {
    await Promise.all(held.map((lock) => lock.release()));
    await subject?.close();
    const redis = redisClient();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('TCP message: the class name and a generic message, no key', async () => {
    lines.length = 0;
    const answer = await subject.send('order.create', { userId: EMAIL });
    expect(answer).toEqual({
      error: { status: 'error', error: 'LockNotAcquiredError', message: BUSY },
    });
    expect(lines.filter((line) => line.includes(`order:${EMAIL}`))).toEqual([
      expect.stringMatching(/^verbose: RpcHandlers\.create answered .*larger `wait`/),
    ]);
  });

  it('socket.io gateway: the same data on the exception event', async () => {
    lines.length = 0;
    const answer = await subject.wsSend('order.create', { userId: EMAIL });
    expect(answer).toEqual({
      exception: { status: 'error', error: 'LockNotAcquiredError', message: BUSY },
    });
    expect(lines.filter((line) => line.includes(`order:${EMAIL}`))).toEqual([
      expect.stringMatching(/^verbose: OrdersGateway\.create answered/),
    ]);
  });

  it('SSE stream whose headers went out first: the error event carries the generic message', async () => {
    lines.length = 0;
    const answer = await subject.http('GET', `/t/events?id=${EMAIL}`);
    expect(answer.status).toBe(200);
    expect(sseError(answer.body)).toBe(BUSY);
    expect(lines.filter((line) => line.includes(`sse:${EMAIL}`))).toEqual([
      expect.stringMatching(/^verbose: HttpRoutes\.events answered with an error event/),
    ]);
  });
});

describe('a Redis that refuses the password, by default', () => {
  const prefix = uniquePrefix('error-bodies-auth');
  let subject: TransportApp;

  beforeAll(async () => {
    const server = await startRedis();
    const admin = redisClient(server.url);
    // The same as `--requirepass`, set after start: the harness' readiness PING has no AUTH.
    await admin.config('SET', 'requirepass', 'right-password');
    admin.disconnect();
    subject = await startTransportApp({
      redis: `redis://:wrong-password@127.0.0.1:${server.port}`,
      prefix,
      commandTimeout: 1_000,
      startupCheck: 'warn', // the app starts on the refused password, to answer requests
    });
  });

  afterAll(async () => {
    await subject?.close();
    await stopAllRedis();
  });

  it('TCP message: no WRONGPASS reply and no reply code in the data; the reply in the log', async () => {
    lines.length = 0;
    const answer = (await subject.send('order.create', { userId: EMAIL })) as {
      error: Record<string, unknown>;
    };
    expect(answer.error).toEqual({
      status: 'error',
      error: expect.stringMatching(/^Redis(Command|Unavailable)Error$/),
      message: UNAVAILABLE,
    });
    expect(JSON.stringify(answer)).not.toMatch(/WRONGPASS|password|alice/);
    expect(lines.filter((line) => line.includes('RpcHandlers.create answered'))).toEqual([
      expect.stringMatching(/^error: .*(WRONGPASS|password)/),
    ]);
  });

  it('socket.io gateway: the same', async () => {
    const answer = (await subject.wsSend('order.create', { userId: EMAIL })) as {
      exception: Record<string, unknown>;
    };
    expect(answer.exception).toEqual({
      status: 'error',
      error: expect.stringMatching(/^Redis(Command|Unavailable)Error$/),
      message: UNAVAILABLE,
    });
  });
});

describe("a busy lock with errorDetails: 'detailed'", () => {
  const prefix = uniquePrefix('error-bodies-busy-detailed');
  let subject: TransportApp;
  let held: LockHandle;

  beforeAll(async () => {
    subject = await startTransportApp({
      redis: SHARED_REDIS_URL,
      prefix,
      errorDetails: 'detailed',
    });
    held = await subject.app.get(LockService).acquire(`order:${EMAIL}`);
  });

  afterAll(async () => {
    await held?.release();
    await subject?.close();
    const redis = redisClient();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('TCP message and gateway: the key, when the holder frees it, and the message', async () => {
    const detailed = {
      status: 'error',
      error: 'LockNotAcquiredError',
      key: `order:${EMAIL}`,
      retryAfterMs: expect.any(Number),
      message: expect.stringContaining(`Lock "order:${EMAIL}" is held by another holder`),
    };
    expect(await subject.send('order.create', { userId: EMAIL })).toEqual({ error: detailed });
    expect(await subject.wsSend('order.create', { userId: EMAIL })).toEqual({
      exception: detailed,
    });
  });
});
