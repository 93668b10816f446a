/**
 * The runnable examples of docs/testing.md (and of the README's "Testing your app"): keep the two
 * in step. The unit test runs on RedisLockTestingModule and must open no socket at all; the e2e
 * test runs two app instances on the shared Redis.
 */
import { Test, type TestingModule } from '@nestjs/testing';
import net from 'node:net';
import { LockNotAcquiredError, LockService, RedisLockModule } from 'nestjs-redis-lock';
import { heldLockKeys, RedisLockTestingModule } from 'nestjs-redis-lock/testing';
import { deleteKeys, redisClient } from '../support/shared-redis';
import { OrderService, PaymentGateway } from './order.service';

// ---- docs/testing.md, "A unit test, no Redis" ------------------------------------------------
describe('OrderService (unit, no Redis)', () => {
  let moduleRef: TestingModule;
  const payments = { charge: jest.fn() };

  beforeEach(async () => {
    moduleRef = await Test.createTestingModule({
      imports: [RedisLockTestingModule.forRoot()],
      providers: [OrderService, { provide: PaymentGateway, useValue: payments }],
    }).compile();
  });

  afterEach(() => moduleRef.close());

  it('charges under the order lock', async () => {
    let held: string[] = [];
    payments.charge.mockImplementation(async () => {
      held = heldLockKeys();
      return 'paid';
    });
    await expect(moduleRef.get(OrderService).pay('7')).resolves.toBe('paid');
    expect(held).toEqual(['order:7']);
  });

  it('refuses a second payment of the same order while one runs', async () => {
    const running = await moduleRef.get(LockService).acquire('order:7');
    await expect(moduleRef.get(OrderService).pay('7')).rejects.toThrow(LockNotAcquiredError);
    await running.release();
  });
});
// ---- end of the unit example -----------------------------------------------------------------

describe('the unit example', () => {
  it('opens no socket: it needs no Redis process', async () => {
    const connect = jest.spyOn(net.Socket.prototype, 'connect');
    try {
      const moduleRef = await Test.createTestingModule({
        imports: [RedisLockTestingModule.forRoot()],
        providers: [OrderService, { provide: PaymentGateway, useValue: { charge: jest.fn() } }],
      }).compile();
      await moduleRef.init();
      const lock = await moduleRef.get(LockService).acquire('order:7');
      await expect(moduleRef.get(OrderService).pay('7')).rejects.toThrow(LockNotAcquiredError);
      await lock.release();
      await moduleRef.close();
      expect(connect).not.toHaveBeenCalled();
    } finally {
      connect.mockRestore();
    }
  });
});

// ---- docs/testing.md, "An e2e test on a real Redis" ------------------------------------------
describe('OrderService (e2e, two replicas on one Redis)', () => {
  const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
  const prefix = `test:orders:${process.pid}:`; // keys of this run only
  let replicas: [TestingModule, TestingModule];
  let openGate!: () => void;
  const gate = new Promise<void>((resolve) => (openGate = resolve));
  const payments = {
    charge: jest.fn(async () => {
      await gate; // a slow payment provider, until the test opens the gate
      return 'paid';
    }),
  };

  async function replica(): Promise<TestingModule> {
    const moduleRef = await Test.createTestingModule({
      imports: [RedisLockModule.forRoot({ redis: redisUrl, prefix })],
      providers: [OrderService, { provide: PaymentGateway, useValue: payments }],
    }).compile();
    return moduleRef.init();
  }

  beforeAll(async () => {
    replicas = [await replica(), await replica()];
  });

  afterAll(() => Promise.all(replicas.map((moduleRef) => moduleRef.close())));

  it('lets one replica pay an order; the other one is refused meanwhile', async () => {
    const [a, b] = [replicas[0].get(OrderService), replicas[1].get(OrderService)];
    const first = a.pay('7');
    await new Promise((resolve) => setTimeout(resolve, 100)); // a holds order:7 now
    await expect(b.pay('7')).rejects.toThrow(LockNotAcquiredError);
    openGate();
    await expect(first).resolves.toBe('paid');
    await expect(b.pay('7')).resolves.toBe('paid'); // free again once paid
  });
});
// ---- end of the e2e example ------------------------------------------------------------------

afterAll(async () => {
  // The repository's rule for the shared Redis (not part of the example): delete what we wrote.
  const redis = redisClient();
  await deleteKeys(redis, `test:orders:${process.pid}:`);
  await redis.quit();
});
