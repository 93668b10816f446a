/**
 * A test double of LockService: `overrideProvider(LockService).useValue(double)` with a plain
 * object that has only the public `acquire`. `@Locked` methods and routes lock through it — its
 * handles used only through the public `LockHandle` interface — and no Redis is reached.
 */
import { Controller, Injectable, Module, Param, Post, type INestApplication } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import request from 'supertest';
import {
  currentLock,
  Locked,
  LockLostError,
  LockNotAcquiredError,
  LockService,
  RedisLockModule,
  type LockHandle,
} from 'nestjs-redis-lock';

@Injectable()
class OrderService {
  readonly placed: string[] = [];
  /** The lock each call ran under, as `currentLock()` showed it. */
  readonly held: { key: string; fence: number; isHeld: boolean }[] = [];

  @Locked('order:<orderId>')
  async place(orderId: string): Promise<string> {
    this.placed.push(orderId);
    const lock = currentLock()!;
    this.held.push({ key: lock.key, fence: lock.fence, isHeld: lock.isHeld });
    return `placed ${orderId}`;
  }

  @Locked('order:<orderId>', { onBusy: 'skip' })
  async placeIfFree(orderId: string): Promise<string> {
    return `placed ${orderId}`;
  }

  @Locked('order:<orderId>')
  async placeSlowly(orderId: string, meanwhile: () => void): Promise<string> {
    meanwhile();
    return `placed ${orderId}`;
  }

  /** Re-enters `order:<orderId>`: the lock this call holds, not a second acquire. */
  @Locked('order:<orderId>')
  async placeTwice(orderId: string): Promise<string[]> {
    return [await this.place(orderId), await this.place(orderId)];
  }
}

@Controller('orders')
class OrderController {
  @Post(':id')
  @Locked('order:<id>')
  async place(@Param('id') id: string): Promise<{ placed: string }> {
    return { placed: id };
  }
}

/** A port nothing listens on: reaching Redis at all would fail the test. */
@Module({
  imports: [RedisLockModule.forRoot({ redis: 'redis://127.0.0.1:1', startupCheck: 'fail' })],
  controllers: [OrderController],
  providers: [OrderService],
})
class AppModule {}

/** A hand-made handle: what `acquire` resolves to in a test. */
function fakeHandle(key: string): LockHandle & { release: jest.Mock } {
  return {
    [Symbol.asyncDispose]: async () => undefined,
    key,
    token: 'test-token',
    fence: 1,
    signal: new AbortController().signal,
    isHeld: true,
    validUntil: Number.MAX_SAFE_INTEGER,
    extend: jest.fn(async () => undefined),
    release: jest.fn(async () => true),
  };
}

describe('LockService overridden by a test double', () => {
  const handles: ReturnType<typeof fakeHandle>[] = [];
  const double = {
    acquire: jest.fn(async (key: string) => {
      const handle = fakeHandle(key);
      handles.push(handle);
      return handle;
    }),
  };
  let moduleRef: TestingModule;
  let app: INestApplication;

  beforeEach(async () => {
    handles.length = 0;
    double.acquire.mockClear();
    moduleRef = await Test.createTestingModule({ imports: [AppModule] })
      .overrideProvider(LockService)
      .useValue(double)
      .compile();
    app = moduleRef.createNestApplication();
    await app.init();
  });
  afterEach(() => app.close());

  it('runs a @Locked method under the handle acquire resolved, and releases it after', async () => {
    const orders = moduleRef.get(OrderService);
    await expect(orders.place('42')).resolves.toBe('placed 42');
    expect(orders.held).toEqual([{ key: 'order:42', fence: 1, isHeld: true }]);
    expect(double.acquire).toHaveBeenCalledTimes(1);
    expect(double.acquire).toHaveBeenCalledWith('order:42', expect.anything());
    expect(handles[0]!.release).toHaveBeenCalledTimes(1);
  });

  it('rejects with the LockNotAcquiredError acquire rejected with', async () => {
    const busy = new LockNotAcquiredError('order:42', 0);
    double.acquire.mockRejectedValueOnce(busy);
    await expect(moduleRef.get(OrderService).place('42')).rejects.toBe(busy);
    expect(moduleRef.get(OrderService).placed).toEqual([]);
  });

  it("resolves undefined without running the method when busy and onBusy is 'skip'", async () => {
    double.acquire.mockRejectedValueOnce(new LockNotAcquiredError('order:42', 0));
    await expect(moduleRef.get(OrderService).placeIfFree('42')).resolves.toBeUndefined();
  });

  it("rejects with the LockLostError the handle's signal aborted with while the method ran", async () => {
    const controller = new AbortController();
    const lost = new LockLostError('order:8', 'not-owner');
    double.acquire.mockImplementationOnce(async (key: string) => {
      const handle = { ...fakeHandle(key), signal: controller.signal };
      handles.push(handle);
      return handle;
    });
    const running = moduleRef.get(OrderService).placeSlowly('8', () => controller.abort(lost));
    await expect(running).rejects.toBe(lost);
    expect(handles[0]!.release).toHaveBeenCalledTimes(1);
  });

  it('joins the lock a call chain holds through the double (re-entrancy): one acquire', async () => {
    await expect(moduleRef.get(OrderService).placeTwice('5')).resolves.toEqual([
      'placed 5',
      'placed 5',
    ]);
    expect(double.acquire).toHaveBeenCalledTimes(1);
    expect(handles[0]!.release).toHaveBeenCalledTimes(1);
  });

  it('runs under an auto-mock whose acquire resolves nothing', async () => {
    double.acquire.mockResolvedValueOnce(undefined as never);
    await expect(moduleRef.get(OrderService).place('9')).resolves.toBe('placed 9');
  });

  it("takes the module defaults the double has: onBusy 'skip' for every method", async () => {
    const ref = await Test.createTestingModule({ imports: [AppModule] })
      .overrideProvider(LockService)
      .useValue({ ...double, options: { onBusy: 'skip' } })
      .compile();
    await ref.init();
    try {
      double.acquire.mockRejectedValueOnce(new LockNotAcquiredError('order:3', 0));
      await expect(ref.get(OrderService).place('3')).resolves.toBeUndefined();
    } finally {
      await ref.close();
    }
  });

  it('locks a @Locked route through the double: 201 when free, 409 when busy', async () => {
    await request(app.getHttpServer()).post('/orders/7').expect(201, { placed: '7' });
    expect(double.acquire).toHaveBeenCalledWith('order:7', expect.anything());
    expect(handles[0]!.release).toHaveBeenCalledTimes(1);
    double.acquire.mockRejectedValueOnce(new LockNotAcquiredError('order:7', 0));
    await request(app.getHttpServer()).post('/orders/7').expect(409);
  });
});
