/**
 * The shortest lease: a lease is a whole number of ms that leaves time once the drift margin is
 * taken off its end. Anything shorter is refused at the call, before Redis is asked; and a grant
 * whose lease ran out before its answer arrived never runs the work under an aborted signal.
 */
import {
  LockLostError,
  RedisLockConfigError,
  type LockHandle,
  type LockService,
} from 'nestjs-redis-lock';
import { CONNECT_BUDGET, onSharedRedis } from './support/lock-services';
import { SHARED_REDIS_URL } from './support/shared-redis';
import { closeAllProxies, startTcpProxy, type TcpProxy } from './support/tcp-proxy';

const { services, prefix } = onSharedRedis('lease-minimum');
let locks: LockService;

beforeAll(() => {
  locks = services.create();
});

afterAll(closeAllProxies);

describe('the shortest lease, at the call', () => {
  it.each([0.001, 1, 2, 2.5])(
    'refuses ttl %p in acquire, tryAcquire, withLock and for many keys, naming 3 ms',
    async (ttl) => {
      const shortest = /whole number of ms of at least 3\b/;
      let ran = false;
      const calls: Promise<unknown>[] = [
        locks.acquire('short', { ttl }),
        locks.tryAcquire('short', { ttl }),
        locks.withLock('short', () => (ran = true), { ttl }),
        locks.acquire('short', { ttl, mode: 'read' }),
        locks.acquire('short', { ttl, permits: 2 }),
        locks.acquire(['short:a', 'short:b'], { ttl }),
      ];
      for (const call of calls) {
        await expect(call).rejects.toThrow(RedisLockConfigError);
        await expect(call).rejects.toThrow(shortest);
      }
      expect(ran).toBe(false);
      expect(await locks.isLocked('short')).toBe(false);
    },
  );

  it('refuses extend() to a lease with no validity, and the lock stays held', async () => {
    await locks.withLock('extend-short', async (lock) => {
      await expect(lock.extend(1e-9)).rejects.toThrow(RedisLockConfigError);
      await expect(lock.extend(2)).rejects.toThrow(/from 3 to 2147483647/);
      expect(lock.isHeld).toBe(true);
    });
  });
});

describe('a grant answered after its lease ran out', () => {
  let proxy: TcpProxy;
  let slow: LockService;

  beforeAll(async () => {
    proxy = await startTcpProxy(Number(new URL(SHARED_REDIS_URL).port || 6379));
    slow = services.create({ redis: proxy.url, prefix });
    await (await slow.acquire('warm-up', CONNECT_BUDGET)).release();
  });

  afterEach(() => proxy.setLatency(0));

  it('never runs the work under an already-aborted signal', async () => {
    // 10 ms each way: the 3 ms lease (1 ms of validity on the local clock) ends before its answer.
    proxy.setLatency(10);
    let ran: { aborted: boolean } | undefined;
    const call = slow.withLock(
      'round-trip',
      (lock: LockHandle) => (ran = { aborted: lock.signal.aborted }),
      { ttl: 3 },
    );
    const error = await call.catch((thrown: unknown) => thrown);
    expect(ran).toBeUndefined();
    expect(error).toBeInstanceOf(LockLostError);
    expect((error as LockLostError).reason).toBe('deadline');
  });
});
