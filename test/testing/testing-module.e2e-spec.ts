/**
 * RedisLockTestingModule: Nest testing modules with `@Locked` services and no Redis. Where a real
 * RedisLockModule is configured, it names a port nothing listens on with `startupCheck: 'fail'`,
 * so any connection attempt would fail the test.
 */
import { Injectable, Logger, Module } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import { Locked, LockNotAcquiredError, LockService, RedisLockModule } from 'nestjs-redis-lock';
import { heldLockKeys, RedisLockTestingModule } from 'nestjs-redis-lock/testing';

@Injectable()
class Payments {
  async charge(orderId: string): Promise<string[]> {
    await new Promise((resolve) => setTimeout(resolve, 50));
    return [orderId, ...heldLockKeys()];
  }
}

@Injectable()
class OrderService {
  constructor(private readonly payments: Payments) {}

  @Locked('order:<orderId>')
  async place(orderId: string): Promise<string[]> {
    return this.payments.charge(orderId);
  }
}

/** Nest's overrideModule() matches a dynamic module by reference: the app keeps this one. */
const lockModule = RedisLockModule.forRoot({ redis: 'redis://127.0.0.1:1', startupCheck: 'fail' });

@Module({ imports: [lockModule], providers: [Payments, OrderService] })
class AppModule {}

describe('RedisLockTestingModule', () => {
  const opened: TestingModule[] = [];
  afterEach(async () => {
    await Promise.all(opened.splice(0).map((moduleRef) => moduleRef.close()));
    jest.restoreAllMocks();
  });

  it('binds @Locked in a compile()-only testing module (no init())', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [RedisLockTestingModule.forRoot()],
      providers: [Payments, OrderService],
    }).compile();
    opened.push(moduleRef);
    const holder = await moduleRef.get(LockService).acquire('order:1');
    try {
      await expect(moduleRef.get(OrderService).place('1')).rejects.toThrow(LockNotAcquiredError);
    } finally {
      await holder.release();
    }
    expect(await moduleRef.get(OrderService).place('1')).toEqual(['1', 'order:1']);
  });

  async function testingModule(
    ...imports: Parameters<typeof Test.createTestingModule>[0]['imports'] & object
  ): Promise<TestingModule> {
    const moduleRef = await Test.createTestingModule({
      imports,
      providers: [Payments, OrderService],
    }).compile();
    opened.push(moduleRef);
    await moduleRef.init();
    return moduleRef;
  }

  it('runs @Locked methods on in-memory locks: one holder, the other call busy', async () => {
    const moduleRef = await testingModule(RedisLockTestingModule.forRoot());
    const orders = moduleRef.get(OrderService);
    expect(moduleRef.get(LockService)).toBeInstanceOf(LockService);
    const [first, second] = await Promise.allSettled([orders.place('7'), orders.place('7')]);
    expect(first).toEqual({ status: 'fulfilled', value: ['7', 'order:7'] });
    expect(second).toMatchObject({ status: 'rejected', reason: expect.any(LockNotAcquiredError) });
    expect(await moduleRef.get(LockService).isLocked('order:7')).toBe(false);
  });

  it('takes the options of forRoot (a wait lets the second call in after the first)', async () => {
    const moduleRef = await testingModule(RedisLockTestingModule.forRoot({ wait: 2_000 }));
    const orders = moduleRef.get(OrderService);
    const results = await Promise.all([orders.place('7'), orders.place('7')]);
    expect(results).toEqual([
      ['7', 'order:7'],
      ['7', 'order:7'],
    ]);
  });

  it('replaces RedisLockModule.forRoot() in an app module with overrideModule()', async () => {
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] })
      .overrideModule(lockModule)
      .useModule(RedisLockTestingModule.forRoot())
      .compile();
    opened.push(moduleRef);
    await moduleRef.init();
    const locks = moduleRef.get(LockService);
    const lock = await locks.acquire('stock:1');
    expect(await locks.isLocked('stock:1')).toBe(true);
    await lock.release();
    expect(await moduleRef.get(OrderService).place('8')).toEqual(['8', 'order:8']);
  });

  it('closes at once over a lock a test left held: shutdownGrace is 0 by default', async () => {
    const moduleRef = await testingModule(RedisLockTestingModule.forRoot());
    const locks = moduleRef.get(LockService);
    expect(locks.options.shutdownGrace).toBe(0);
    const left = await locks.acquire('left-held');
    const lost: string[] = [];
    locks.on('lost', (error, lock) => lost.push(`${lock.key}: ${error.reason}`));
    // No grace timer to wait for: close() settles with the lock aborted, reported and released.
    await moduleRef.close();
    expect(left.signal.aborted).toBe(true);
    expect(lost).toEqual(['left-held: shutdown']);
    expect(left.isHeld).toBe(false);
  });

  it('keeps a shutdownGrace given to forRoot()', async () => {
    const moduleRef = await testingModule(RedisLockTestingModule.forRoot({ shutdownGrace: 250 }));
    expect(moduleRef.get(LockService).options.shutdownGrace).toBe(250);
  });

  it('gives each forRoot() its own locks', async () => {
    const a = (await testingModule(RedisLockTestingModule.forRoot())).get(LockService);
    const b = (await testingModule(RedisLockTestingModule.forRoot())).get(LockService);
    const lock = await a.acquire('shared');
    expect(await b.isLocked('shared')).toBe(false);
    await lock.release();
  });

  it('warns when created with NODE_ENV=production, and only then', async () => {
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    const saved = process.env.NODE_ENV;
    try {
      process.env.NODE_ENV = 'test';
      await testingModule(RedisLockTestingModule.forRoot());
      expect(warn).not.toHaveBeenCalled();
      process.env.NODE_ENV = 'production';
      await testingModule(RedisLockTestingModule.forRoot());
    } finally {
      process.env.NODE_ENV = saved;
    }
    expect(warn).toHaveBeenCalledTimes(1);
    expect(warn.mock.calls[0]?.[0]).toMatch(/RedisLockTestingModule .*NODE_ENV=production/);
  });

  it('heldLockKeys() lists nested locks outermost first, and nothing outside them', async () => {
    const moduleRef = await testingModule(RedisLockTestingModule.forRoot());
    const locks = moduleRef.get(LockService);
    expect(heldLockKeys()).toEqual([]);
    const seen = await locks.withLock('tenant:1', () =>
      locks.withLock('report:1', () => heldLockKeys()),
    );
    expect(seen).toEqual(['tenant:1', 'report:1']);
  });
});
