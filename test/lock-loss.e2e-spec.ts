/**
 * Loss is never silent: when Redis stops answering, the holder learns it lost the
 * lock by its local deadline — signal aborted with LockLostError, 'lost' event — without any
 * unhandled rejection (test/support/fail-on-unhandled.ts fails the test on one). A private
 * redis-server is paused with SIGSTOP: connections stay open, nothing answers.
 */
import { LockLostError, type LockHandle } from 'nestjs-redis-lock';
import Redis from 'ioredis';
import { CONNECT_BUDGET, lockServices, redisKeyOf } from './support/lock-services';
import { startRedis, stopAllRedis, type RedisServer } from './support/redis-server';
import { now, sleep } from './support/time';

const prefix = 'loss:';
const TTL = 600;
/** Timers fire late on a busy machine (a GC pause, a stalled loop); the loss must still come this close to the deadline. */
const SLACK = 400;
let server: RedisServer;
let probe: Redis;
let services: ReturnType<typeof lockServices>;
const keyOf = (key: string): string => redisKeyOf(prefix, key);

beforeAll(async () => {
  server = await startRedis();
  probe = new Redis(server.url);
  services = lockServices({ redis: server.url, prefix, ttl: TTL, commandTimeout: 200 });
});

afterAll(async () => {
  if (server?.running) server.resume();
  await services?.closeAll();
  probe?.disconnect();
  await stopAllRedis();
});

/** Resolves the monotonic time at which the lock's signal aborts. */
function abortTime(lock: LockHandle): Promise<number> {
  return new Promise((resolve) =>
    lock.signal.addEventListener('abort', () => resolve(now()), { once: true }),
  );
}

describe('lock loss when Redis stops answering', () => {
  it("aborts the holder's signal with LockLostError no later than its local deadline", async () => {
    const locks = services.create();
    const lost = jest.fn();
    locks.on('lost', lost);
    const lock = await locks.acquire('paused', CONNECT_BUDGET); // commandTimeout is 200 ms
    const aborted = abortTime(lock);

    server.pause();
    const pausedAt = now();
    let abortedAt: number;
    try {
      abortedAt = await aborted;
      // Keep Redis stopped past the lease on its side too, so the key is gone when it resumes.
      await sleep(Math.max(0, pausedAt + TTL + 100 - now()));
    } finally {
      server.resume();
    }

    const reason: unknown = lock.signal.reason;
    expect(reason).toBeInstanceOf(LockLostError);
    expect((reason as LockLostError).reason).toBe('deadline');
    expect((reason as LockLostError).key).toBe('paused');
    // Not before the deadline (no false alarm), and not much after it.
    expect(abortedAt).toBeGreaterThanOrEqual(lock.validUntil);
    expect(abortedAt).toBeLessThanOrEqual(lock.validUntil + SLACK);
    expect(abortedAt - pausedAt).toBeLessThanOrEqual(TTL + SLACK);
    expect(lock.isHeld).toBe(false);
    expect(lost).toHaveBeenCalledTimes(1);
    expect(lost).toHaveBeenCalledWith(reason, lock);

    // Redis answers again: the release reports the loss and deletes nothing.
    expect(await lock.release()).toBe(false);
    expect(await probe.exists(keyOf('paused'))).toBe(0);
  });

  it('makes withLock() reject with LockLostError once the work settles', async () => {
    const locks = services.create({ onLost: 'throw' });
    let sawAbort = false;
    const run = locks.withLock(
      'paused-work',
      async (lock) => {
        server.pause();
        await new Promise((resolve) =>
          lock.signal.addEventListener('abort', resolve, { once: true }),
        );
        sawAbort = true;
        return 'finished anyway';
      },
      CONNECT_BUDGET,
    );
    try {
      await expect(run).rejects.toBeInstanceOf(LockLostError);
    } finally {
      server.resume();
    }
    expect(sawAbort).toBe(true);
  });

  it('lets a new holder take a lost lock once Redis answers again', async () => {
    const lock = await services.create().acquire('paused-work', { wait: TTL * 2 });
    expect(await probe.get(keyOf('paused-work'))).toBe(lock.token);
    expect(await lock.release()).toBe(true);
  });
});
