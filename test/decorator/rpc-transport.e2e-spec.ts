/**
 * `@Locked` on microservice message handlers over a real transport (TCP on loopback): the key
 * comes from the message payload, one of concurrent messages for one key runs, and the caller
 * gets the failure as data it can act on (`error: 'LockNotAcquiredError'` and a generic message,
 * never the key) — not Nest's bare "Internal server error", which is what an Error thrown by an
 * interceptor or a service would become on this transport without the module's default answer.
 */
import { Controller, Injectable, ParseIntPipe, type INestMicroservice } from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import {
  ClientProxyFactory,
  MessagePattern,
  Payload,
  Transport,
  type ClientProxy,
  type MicroserviceOptions,
} from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import type Redis from 'ioredis';
import { firstValueFrom } from 'rxjs';
import {
  currentLock,
  LockExceptionFilter,
  Locked,
  RedisLockModule,
  type LockTransportError,
} from 'nestjs-redis-lock';
import { freePort } from '../support/free-port';
import { deleteKeys, redisClient, SHARED_REDIS_URL } from '../support/shared-redis';
import { Gate } from '../support/time';
import { uniquePrefix } from '../support/unique-prefix';
import { leaseKey } from './decorator-app';

/** What callers are told of a busy lock by default: no key, no advice. */
const BUSY = 'Another request is working on the same resource. Try again shortly.';

/** Holders hold their lock until the test has seen the other callers refused. */
const gate = new Gate();

@Injectable()
class SettlementService {
  @Locked('settle:<batchId>')
  async settle(batchId: string): Promise<string> {
    await gate.opened;
    return batchId;
  }
}

@Controller()
class OrderHandlers {
  runs = 0;

  constructor(private readonly settlements: SettlementService) {}

  @MessagePattern('order.create')
  @Locked('order:<userId>')
  async create(@Payload() data: { userId: string }): Promise<{ userId: string; fence: number }> {
    this.runs++;
    await gate.opened;
    return { userId: data.userId, fence: currentLock()!.fence };
  }

  /** Keyed from the value the handler receives: `'007'` becomes `7` before the lock is taken. */
  @MessagePattern('account.read')
  @Locked('account:<id>')
  async account(@Payload('id', ParseIntPipe) id: number): Promise<{ id: number; key: string }> {
    return { id, key: currentLock()!.key };
  }

  /** Not locked itself: the lock is taken by the service it calls. */
  @MessagePattern('batch.settle')
  settle(@Payload() data: { batchId: string }): Promise<string> {
    return this.settlements.settle(data.batchId);
  }
}

type Outcome = { ok: true; value: unknown } | { ok: false; error: LockTransportError };

/** Sends all at once; opens the gate once `refusals` of them failed, then resolves them all. */
async function concurrently(sends: Promise<Outcome>[], refusals: number): Promise<Outcome[]> {
  let failed = 0;
  let allRefused!: () => void;
  const refused = new Promise<void>((resolve) => (allRefused = resolve));
  for (const sent of sends) {
    void sent.then((outcome) => {
      if (!outcome.ok && ++failed === refusals) allRefused();
    });
  }
  await refused;
  gate.release();
  return Promise.all(sends);
}

async function startMicroservice(prefix: string, withFilter: boolean) {
  const port = await freePort();
  const moduleRef = await Test.createTestingModule({
    imports: [RedisLockModule.forRoot({ redis: SHARED_REDIS_URL, prefix })],
    controllers: [OrderHandlers],
    providers: [
      SettlementService,
      ...(withFilter ? [{ provide: APP_FILTER, useClass: LockExceptionFilter }] : []),
    ],
  }).compile();
  const app = moduleRef.createNestMicroservice<MicroserviceOptions>({
    transport: Transport.TCP,
    options: { host: '127.0.0.1', port },
    logger: false,
  });
  await app.listen();
  const client = ClientProxyFactory.create({
    transport: Transport.TCP,
    options: { host: '127.0.0.1', port },
  });
  await client.connect();
  const send = (pattern: string, data: unknown): Promise<Outcome> =>
    firstValueFrom(client.send(pattern, data)).then(
      (value: unknown) => ({ ok: true as const, value }),
      (error: LockTransportError) => ({ ok: false as const, error }),
    );
  return { app, client, send, handlers: app.get(OrderHandlers) };
}

describe('@Locked on microservice handlers (TCP transport)', () => {
  const prefix = uniquePrefix('decorator-rpc');
  let app: INestMicroservice;
  let client: ClientProxy;
  let send: (pattern: string, data: unknown) => Promise<Outcome>;
  let handlers: OrderHandlers;
  let redis: Redis;

  beforeAll(async () => {
    redis = redisClient();
    ({ app, client, send, handlers } = await startMicroservice(prefix, false));
  });

  afterAll(async () => {
    await client?.close();
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('keys a message from its piped payload parameter, and takes no lock when the pipe rejects it', async () => {
    expect(await send('account.read', { id: '007' })).toEqual({
      ok: true,
      value: { id: 7, key: 'account:7' },
    });
    const rejected = await send('account.read', { id: 'abc' });
    expect(rejected.ok).toBe(false);
    expect(await redis.keys(`${prefix}{account:abc*`)).toEqual([]);
  });

  it('runs one of 5 concurrent messages for one user; the others get LockNotAcquiredError data', async () => {
    const results = await concurrently(
      Array.from({ length: 5 }, () => send('order.create', { userId: 'u-1' })),
      4,
    );
    const ok = results.filter((result) => result.ok);
    const busy = results.flatMap((result) => (result.ok ? [] : [result.error]));
    expect(ok).toEqual([{ ok: true, value: { userId: 'u-1', fence: expect.any(Number) } }]);
    expect(busy).toHaveLength(4);
    for (const error of busy) {
      expect(error).toEqual({ status: 'error', error: 'LockNotAcquiredError', message: BUSY });
    }
    expect(handlers.runs).toBe(1);
    expect(await redis.exists(leaseKey(prefix, 'order:u-1'))).toBe(0);
  });

  it('answers a payload without the key field with LockKeyError data, writing nothing', async () => {
    const result = await send('order.create', { other: 1 });
    expect(result).toEqual({
      ok: false,
      error: {
        status: 'error',
        error: 'LockKeyError',
        message: 'The request is missing a value this operation needs, or a value is invalid.',
      },
    });
    expect(await redis.exists(leaseKey(prefix, 'order:undefined'))).toBe(0);
  });

  it('without LockExceptionFilter registered, a busy @Locked service method still answers as data', async () => {
    const results = await concurrently(
      [send('batch.settle', { batchId: 'b-1' }), send('batch.settle', { batchId: 'b-1' })],
      1,
    );
    expect(results).toContainEqual({ ok: true, value: 'b-1' });
    expect(results).toContainEqual({
      ok: false,
      error: { status: 'error', error: 'LockNotAcquiredError', message: BUSY },
    });
  });
});

describe('LockExceptionFilter on a microservice (TCP transport)', () => {
  const prefix = uniquePrefix('decorator-rpc-filter');
  let app: INestMicroservice;
  let client: ClientProxy;
  let send: (pattern: string, data: unknown) => Promise<Outcome>;
  let redis: Redis;

  beforeAll(async () => {
    redis = redisClient();
    ({ app, client, send } = await startMicroservice(prefix, true));
  });

  afterAll(async () => {
    await client?.close();
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('sends a busy @Locked service method as LockNotAcquiredError data', async () => {
    const results = await concurrently(
      [send('batch.settle', { batchId: 'b-2' }), send('batch.settle', { batchId: 'b-2' })],
      1,
    );
    expect(results).toContainEqual({ ok: true, value: 'b-2' });
    const busy = results.find((result) => !result.ok) as { error: LockTransportError };
    expect(busy.error).toEqual({ status: 'error', error: 'LockNotAcquiredError', message: BUSY });
  });
});
