/**
 * `@Locked` on `@EventPattern` handlers over a real TCP transport. An event has no caller to hear
 * an error: a lock failure is logged with the pattern, the key and the reason, a handler that would
 * drop events on a busy key (`wait: 0`) is named by a warning at bootstrap, and with a `wait`
 * budget events on one key run one after another.
 */
import { Controller, Injectable, Logger, type INestMicroservice } from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import {
  ClientProxyFactory,
  EventPattern,
  Payload,
  Transport,
  type ClientProxy,
  type MicroserviceOptions,
} from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import type Redis from 'ioredis';
import { firstValueFrom } from 'rxjs';
import { LockExceptionFilter, Locked, LockService, RedisLockModule } from 'nestjs-redis-lock';
import { freePort } from '../support/free-port';
import { deleteKeys, redisClient, SHARED_REDIS_URL } from '../support/shared-redis';
import { Gate, waitFor } from '../support/time';
import { uniquePrefix } from '../support/unique-prefix';

const gate = new Gate();

/** Counts runs and the most that ran at once, per handler. */
class Tally {
  running = 0;
  maxRunning = 0;
  runs = 0;
  async run(work: Promise<void>): Promise<void> {
    this.runs++;
    this.maxRunning = Math.max(this.maxRunning, ++this.running);
    try {
      await work;
    } finally {
      this.running--;
    }
  }
}

/** A provider method: its lock failure reaches the event handler as a thrown error. */
@Injectable()
class Ledger {
  @Locked('ledger:<accountId>')
  async post(accountId: string): Promise<void> {
    void accountId;
  }
}

@Controller()
class PaymentEvents {
  constructor(private readonly ledger: Ledger) {}

  readonly failFast = new Tally();
  readonly waiting = new Tally();

  /** The default `wait: 0`. */
  @EventPattern('payment.received')
  @Locked('account:<accountId>')
  received(@Payload() data: { accountId: string }): Promise<void> {
    void data;
    return this.failFast.run(gate.opened);
  }

  @EventPattern('payment.settled')
  @Locked('account:<accountId>', { wait: 5_000 })
  settled(@Payload() data: { accountId: string }): Promise<void> {
    void data;
    return this.waiting.run(new Promise((resolve) => setTimeout(resolve, 30)));
  }

  /** Not locked itself: the service it calls is. */
  @EventPattern('payment.booked')
  booked(@Payload() data: { accountId: string }): Promise<void> {
    return this.ledger.post(data.accountId);
  }

  /** Dropping duplicates on purpose: no warning. */
  @EventPattern('payment.reminder')
  @Locked('reminder:<accountId>', { onBusy: 'skip' })
  async reminder(@Payload() data: { accountId: string }): Promise<void> {
    void data;
  }
}

describe('@Locked on @EventPattern handlers (TCP transport)', () => {
  const prefix = uniquePrefix('decorator-events');
  let app: INestMicroservice;
  let client: ClientProxy;
  let handlers: PaymentEvents;
  let redis: Redis;
  let warn: jest.SpyInstance;
  let error: jest.SpyInstance;
  const warnings: string[] = [];

  beforeAll(async () => {
    redis = redisClient();
    warn = jest
      .spyOn(Logger.prototype, 'warn')
      .mockImplementation((message: unknown) => void warnings.push(String(message)));
    error = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    const port = await freePort();
    const moduleRef = await Test.createTestingModule({
      imports: [RedisLockModule.forRoot({ redis: SHARED_REDIS_URL, prefix })],
      controllers: [PaymentEvents],
      providers: [Ledger, { provide: APP_FILTER, useClass: LockExceptionFilter }],
    }).compile();
    app = moduleRef.createNestMicroservice<MicroserviceOptions>({
      transport: Transport.TCP,
      options: { host: '127.0.0.1', port },
      logger: false,
    });
    await app.listen();
    handlers = app.get(PaymentEvents);
    client = ClientProxyFactory.create({
      transport: Transport.TCP,
      options: { host: '127.0.0.1', port },
    });
    await client.connect();
  });

  afterAll(async () => {
    warn.mockRestore();
    error.mockRestore();
    await client?.close();
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  const emit = (pattern: string, data: unknown): Promise<unknown> =>
    firstValueFrom(client.emit(pattern, data), { defaultValue: undefined });

  it('warns at bootstrap about the event handler that drops events on a busy key, and only that one', () => {
    const named = warnings.filter((line) => line.includes('event handler'));
    expect(named).toEqual([expect.stringContaining('PaymentEvents.received ("payment.received")')]);
    expect(named[0]).toContain('wait');
  });

  it('logs each event dropped on a busy key with the pattern, the key and the reason', async () => {
    error.mockClear();
    await emit('payment.received', { accountId: 'a-1' });
    await waitFor(() => handlers.failFast.running === 1, 5_000);
    await emit('payment.received', { accountId: 'a-1' });
    await emit('payment.received', { accountId: 'a-1' });
    await waitFor(() => error.mock.calls.length === 2, 5_000);
    gate.release();
    await waitFor(() => handlers.failFast.running === 0, 5_000);

    expect(handlers.failFast.runs).toBe(1);
    for (const [line] of error.mock.calls) {
      expect(line).toContain('"payment.received"');
      expect(line).toContain('PaymentEvents.received');
      expect(line).toContain('lock "account:a-1"');
      expect(line).toContain('LockNotAcquiredError');
    }
  });

  it('runs every event on one key, one at a time, when the handler has a wait budget', async () => {
    error.mockClear();
    await Promise.all(
      Array.from({ length: 3 }, () => emit('payment.settled', { accountId: 'a-2' })),
    );
    await waitFor(() => handlers.waiting.runs === 3 && handlers.waiting.running === 0, 10_000);
    expect(handlers.waiting.maxRunning).toBe(1);
    expect(error).not.toHaveBeenCalled();
  });

  it('logs a busy @Locked service method called from an event handler (LockExceptionFilter)', async () => {
    const held = await app.get(LockService).acquire('ledger:a-3');
    try {
      warn.mockClear();
      await emit('payment.booked', { accountId: 'a-3' });
      await waitFor(() => warn.mock.calls.length > 0, 5_000);
      const line = String(warn.mock.calls[0][0]);
      expect(line).toContain('"payment.booked"');
      expect(line).toContain('"ledger:a-3" is held by another holder');
    } finally {
      await held.release();
    }
  });
});
