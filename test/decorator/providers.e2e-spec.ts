/**
 * `@Locked` on provider methods: keys from the method's own arguments, re-entrancy through the
 * async call chain (controller → service on one key), `currentLock()`, `onBusy`, `wait`, key
 * functions, and what passes through untouched.
 */
import {
  Controller,
  Injectable,
  Param,
  Post,
  type INestApplication,
  UnprocessableEntityException,
} from '@nestjs/common';
import type Redis from 'ioredis';
import request from 'supertest';
import {
  currentLock,
  LockKeyError,
  LockNotAcquiredError,
  LockService,
  Locked,
  type LockHandle,
} from 'nestjs-redis-lock';
import { deleteKeys, redisClient } from '../support/shared-redis';
import { sleep } from '../support/time';
import { uniquePrefix } from '../support/unique-prefix';
import { createDecoratorApp, keysUnder, leaseKey } from './decorator-app';

interface Seen {
  key: string;
  fence: number;
  aborted: boolean;
}
const seen = (lock: LockHandle | undefined): Seen | undefined =>
  lock && { key: lock.key, fence: lock.fence, aborted: lock.signal.aborted };

@Injectable()
class StockService {
  constructor(private readonly locks: LockService) {}

  @Locked('stock:<sku>')
  async reserve(sku: string): Promise<{ stock: Seen; heldOrder: boolean; heldStock: boolean }> {
    return {
      stock: seen(currentLock())!,
      heldOrder: await this.locks.isLocked('order:user-1'),
      heldStock: await this.locks.isLocked(`stock:${sku}`),
    };
  }
}

@Injectable()
class OrderService {
  runs = 0;
  readonly runWindows: [number, number][] = [];

  constructor(private readonly stock: StockService) {}

  @Locked('order:<userId>')
  async createOrder(userId: string, voucherId: string): Promise<Seen & { voucherId: string }> {
    this.runs++;
    return { ...seen(currentLock())!, voucherId };
  }

  /** Same key as `createOrder`, then a different key (`stock:<sku>`) inside it. */
  @Locked('order:<userId>')
  async checkout(userId: string, sku: string) {
    const outer = seen(currentLock());
    const inner = await this.createOrder(userId, 'v-1');
    const stock = await this.stock.reserve(sku);
    return { outer, inner, stock, afterNested: seen(currentLock()) };
  }

  @Locked('order:<userId>', { reentrant: false })
  async notReentrant(userId: string): Promise<string> {
    return userId;
  }

  @Locked('order:<userId>')
  async callsNotReentrant(userId: string): Promise<string> {
    return this.notReentrant(userId);
  }

  /** Two branches of Promise.all share the holder: both run, at the same time. */
  @Locked('order:<userId>')
  async parallelBranches(userId: string): Promise<number[]> {
    const branch = async (): Promise<number> => {
      const lock = currentLock()!;
      await sleep(30);
      return lock.fence;
    };
    void userId;
    return Promise.all([branch(), this.slowBranch(userId)]);
  }

  @Locked('order:<userId>')
  async slowBranch(userId: string): Promise<number> {
    void userId;
    await sleep(30);
    return currentLock()!.fence;
  }

  @Locked('handle:<id>', { ttl: 2_000 })
  async useHandle(id: string): Promise<{ fence: number; pttlBefore: number; pttlAfter: number }> {
    const lock = currentLock()!;
    const redis = redisClient();
    try {
      const pttlBefore = await redis.pttl(leaseKey(prefix, `handle:${id}`));
      await lock.extend(20_000);
      const pttlAfter = await redis.pttl(leaseKey(prefix, `handle:${id}`));
      expect(lock.signal).toBeInstanceOf(AbortSignal);
      expect(lock.signal.aborted).toBe(false);
      return { fence: lock.fence, pttlBefore, pttlAfter };
    } finally {
      await redis.quit();
    }
  }

  @Locked('job:<name>', { onBusy: 'skip' })
  async skipWhenBusy(name: string): Promise<string> {
    this.runs++;
    return `ran ${name}`;
  }

  @Locked('job:<name>')
  async throwWhenBusy(name: string): Promise<string> {
    this.runs++;
    return name;
  }

  @Locked('queue:<id>', { wait: 3_000 })
  async waitForIt(id: string): Promise<string> {
    const start = performance.now();
    await sleep(100);
    this.runWindows.push([start, performance.now()]);
    return id;
  }

  @Locked((tenant: string, order: { id: number }) => `fn:${tenant}:${order.id}`)
  async byKeyFunction(tenant: string, order: { id: number }): Promise<string> {
    void tenant;
    void order;
    return currentLock()!.key;
  }

  @Locked('idx:<0.id>:<1>')
  async byIndex(order: { id: string }, version: number): Promise<string> {
    void order;
    void version;
    return currentLock()!.key;
  }

  @Locked('destructured:<tenantId>:<orderId>')
  async destructured({
    tenantId,
    order: { id: orderId },
  }: {
    tenantId: string;
    order: { id: string };
  }): Promise<string> {
    void tenantId;
    void orderId;
    return currentLock()!.key;
  }

  @Locked('user:<userId>')
  async needsUser(userId: string | undefined | object): Promise<string> {
    this.runs++;
    return String(userId);
  }

  @Locked('fails:<id>')
  async fails(id: string): Promise<never> {
    throw new UnprocessableEntityException(`cannot process ${id}`);
  }
}

@Controller('checkout')
class CheckoutController {
  constructor(private readonly orders: OrderService) {}

  @Post(':userId')
  @Locked('order:<userId>')
  async checkout(@Param('userId') userId: string) {
    const route = seen(currentLock());
    const service = await this.orders.createOrder(userId, 'v-9');
    return { route, service };
  }
}

const prefix = uniquePrefix('decorator-providers');

describe('@Locked on provider methods', () => {
  let app: INestApplication;
  let orders: OrderService;
  let locks: LockService;
  let redis: Redis;

  beforeAll(async () => {
    redis = redisClient();
    app = await createDecoratorApp({
      prefix,
      controllers: [CheckoutController],
      providers: [OrderService, StockService],
    });
    orders = app.get(OrderService);
    locks = app.get(LockService);
  });

  afterAll(async () => {
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  beforeEach(() => {
    orders.runs = 0;
  });

  it('locks on the argument named in the template, and releases after', async () => {
    const result = await orders.createOrder('user-1', 'v-1');
    expect(result).toEqual({
      key: 'order:user-1',
      fence: expect.any(Number),
      aborted: false,
      voucherId: 'v-1',
    });
    expect(await locks.isLocked('order:user-1')).toBe(false);
  });

  describe('re-entrancy', () => {
    it('a @Locked controller calling a @Locked service on the same key does not dead-lock', async () => {
      const response = await request(app.getHttpServer()).post('/checkout/user-1');
      expect(response.status).toBe(201);
      const { route, service } = response.body;
      expect(route.key).toBe('order:user-1');
      // The service re-used the route's lock: same fence, no second acquisition.
      expect(service).toMatchObject({ key: 'order:user-1', fence: route.fence, voucherId: 'v-9' });
      expect(await locks.isLocked('order:user-1')).toBe(false);
    });

    it('re-uses the lock on the same key, and acquires a different key normally', async () => {
      const result = await orders.checkout('user-1', 'sku-1');
      expect(result.inner.fence).toBe(result.outer!.fence);
      expect(result.stock.stock.key).toBe('stock:sku-1');
      expect(result.stock.heldOrder).toBe(true);
      expect(result.stock.heldStock).toBe(true);
      // Back in the outer method, currentLock() is the outer lock again.
      expect(result.afterNested).toEqual(result.outer);
      expect(await locks.isLocked('stock:sku-1')).toBe(false);
      expect(await locks.isLocked('order:user-1')).toBe(false);
    });

    it('with reentrant: false, a nested call on the same key is busy', async () => {
      await expect(orders.callsNotReentrant('user-2')).rejects.toBeInstanceOf(LockNotAcquiredError);
      expect(await locks.isLocked('order:user-2')).toBe(false);
    });

    it('shares the holder between Promise.all branches (documented caveat)', async () => {
      const [a, b] = await orders.parallelBranches('user-3');
      expect(a).toBe(b);
    });

    it('does not leak the held lock to unrelated calls made after the method', async () => {
      expect(currentLock()).toBeUndefined();
      await orders.createOrder('user-4', 'v');
      expect(currentLock()).toBeUndefined();
    });
  });

  it('currentLock() gives the running method its fence, signal and extend()', async () => {
    const first = await orders.useHandle('h1');
    const second = await orders.useHandle('h1');
    expect(second.fence).toBeGreaterThan(first.fence);
    expect(first.pttlBefore).toBeGreaterThan(0);
    expect(first.pttlBefore).toBeLessThanOrEqual(2_000);
    expect(first.pttlAfter).toBeGreaterThan(10_000);
  });

  describe('busy', () => {
    it("onBusy: 'skip' returns undefined without running the method", async () => {
      const holder = await locks.acquire('job:nightly');
      try {
        await expect(orders.skipWhenBusy('nightly')).resolves.toBeUndefined();
        expect(orders.runs).toBe(0);
      } finally {
        await holder.release();
      }
      await expect(orders.skipWhenBusy('nightly')).resolves.toBe('ran nightly');
      expect(orders.runs).toBe(1);
    });

    it("onBusy: 'throw' (the default) rejects with LockNotAcquiredError naming the key", async () => {
      const holder = await locks.acquire('job:report');
      try {
        const attempt = orders.throwWhenBusy('report');
        await expect(attempt).rejects.toBeInstanceOf(LockNotAcquiredError);
        await expect(attempt).rejects.toMatchObject({ key: 'job:report' });
        expect(orders.runs).toBe(0);
      } finally {
        await holder.release();
      }
    });

    it('`wait` lets the second caller run after the first', async () => {
      orders.runWindows.length = 0;
      const results = await Promise.all([orders.waitForIt('q'), orders.waitForIt('q')]);
      expect(results).toEqual(['q', 'q']);
      const [first, second] = [...orders.runWindows].sort((a, b) => a[0] - b[0]);
      expect(second![0]).toBeGreaterThanOrEqual(first![1]);
    });
  });

  describe('keys', () => {
    it('builds the key with a key function (...args) => string on a provider', async () => {
      await expect(orders.byKeyFunction('acme', { id: 7 })).resolves.toBe('fn:acme:7');
    });

    it('resolves argument indexes <0.id> and <1>', async () => {
      await expect(orders.byIndex({ id: 'o-1' }, 3)).resolves.toBe('idx:o-1:3');
    });

    it('resolves names bound by destructuring', async () => {
      await expect(orders.destructured({ tenantId: 't', order: { id: 'o' } })).resolves.toBe(
        'destructured:t:o',
      );
    });

    it.each([
      ['undefined', undefined],
      ['an empty string', ''],
      ['an object', { id: 1 }],
    ])(
      'rejects %s with LockKeyError, without running or writing to Redis',
      async (_what, value) => {
        await expect(orders.needsUser(value)).rejects.toBeInstanceOf(LockKeyError);
        expect(orders.runs).toBe(0);
        expect(await keysUnder(redis, `${prefix}{user:`)).toEqual([]);
      },
    );
  });

  it("passes the method's own exception through unchanged, and releases the lock", async () => {
    const attempt = orders.fails('f1');
    await expect(attempt).rejects.toBeInstanceOf(UnprocessableEntityException);
    await expect(attempt).rejects.toThrow('cannot process f1');
    expect(await locks.isLocked('fails:f1')).toBe(false);
  });

  it('keeps `this`, the method name and its length', () => {
    expect(OrderService.prototype.createOrder.name).toBe('createOrder');
    expect(OrderService.prototype.createOrder.length).toBe(2);
    expect(OrderService.prototype.destructured.length).toBe(1);
    // `this` is checked by every test above: the methods read this.runs / this.stock.
  });
});
