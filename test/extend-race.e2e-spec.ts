/**
 * `extend()` against the watchdog and a slow link: the handle's local deadline never lies beyond
 * what Redis holds, whatever order a renewal and an extension reach Redis in; an extension that
 * comes back after the lock was declared lost rejects; and one that timed out locally leaves the
 * handle at the sooner of the two leases. A TCP proxy in front of the shared Redis delays
 * commands and replies, which is what lets a renewal overtake an extension's reply.
 */
import {
  LockLostError,
  LockService,
  RedisLockConfigError,
  RedisUnavailableError,
  type LockHandle,
} from 'nestjs-redis-lock';
import { onSharedRedis } from './support/lock-services';
import { SHARED_REDIS_URL } from './support/shared-redis';
import { closeAllProxies, startTcpProxy, type TcpProxy } from './support/tcp-proxy';
import { now, sleep } from './support/time';

const { prefix, redis, services, keyOf } = onSharedRedis('extend-race');
const TTL = 600;
let proxy: TcpProxy;
let locks: LockService;

beforeAll(async () => {
  proxy = await startTcpProxy(Number(new URL(SHARED_REDIS_URL).port || 6379));
  locks = new LockService({ redis: proxy.url, prefix, ttl: TTL, commandTimeout: 2_000 });
  await (await locks.acquire('warm-up')).release(); // scripts loaded, connection open
});

afterEach(() => proxy.setLatency(0));

afterAll(async () => {
  await locks?.close();
  await closeAllProxies();
});

/**
 * How far the handle's deadline lies beyond Redis' expiry of its key, in ms (≤ 0 is sound). The
 * PTTL is measured after `before`, so the round trip counts in the lock's favour.
 */
async function overshoot(lock: LockHandle, key: string): Promise<number> {
  const before = now();
  const remaining = lock.validUntil - before;
  const pttl = Math.max(0, await redis.pttl(keyOf(key)));
  return remaining - (pttl + (now() - before) + 2);
}

describe('extend() racing a renewal', () => {
  it('never leaves the deadline beyond Redis when a renewal falls due while extend() is in flight', async () => {
    const key = 'raced';
    const lock = await locks.acquire(key); // the watchdog renews it ~200 ms from now
    proxy.setLatency(150); // extend's reply comes back ~300 ms later: after the renewal is due
    await lock.extend(5_000);
    await sleep(400); // a renewal sent while extend() was in flight has landed by now
    proxy.setLatency(0);

    expect(lock.isHeld).toBe(true);
    expect(await overshoot(lock, key)).toBeLessThanOrEqual(0);

    // And nobody else gets in while the handle says it holds the lock (Redis' key would have
    // expired ~950 ms after acquire had a stale renewal cut it back to the old lease).
    const other = services.create();
    const until = now() + 1_200;
    while (now() < until) {
      const intruder = await other.tryAcquire(key);
      if (intruder) {
        const heldMeanwhile = lock.isHeld;
        await intruder.release();
        expect(heldMeanwhile).toBe(false);
        break;
      }
      await sleep(40);
    }
    expect(lock.isHeld).toBe(true);
    expect(await lock.release()).toBe(true);
  });
});

describe('extend() and the loss of the lock', () => {
  it('rejects with LockLostError when the deadline passed while the extension was in flight', async () => {
    const key = 'lost-in-flight';
    const lost: LockLostError[] = [];
    const onLost = (error: LockLostError): void => void lost.push(error);
    locks.on('lost', onLost);
    try {
      const lock = await locks.acquire(key);
      proxy.setLatency(400); // the reply lands ~800 ms later, past the 600 ms lease
      const extended = lock.extend(5_000).then(
        () => 'resolved',
        (error: unknown) => error,
      );
      const outcome = await extended;
      expect(outcome).toBeInstanceOf(LockLostError);
      expect(lost).toHaveLength(1);
      expect(lock.isHeld).toBe(false);
      expect(lock.signal.aborted).toBe(true);
      expect(await lock.release()).toBe(false);
    } finally {
      locks.off('lost', onLost);
    }
  });

  it('leaves the handle at the sooner deadline when an extension times out but ran in Redis', async () => {
    const key = 'timed-out';
    const hasty = new LockService({ redis: proxy.url, prefix, ttl: 10_000, commandTimeout: 300 });
    try {
      const lock = await hasty.acquire(key);
      proxy.setLatency(200); // Redis runs it after 200 ms; the answer would come after 400 ms
      await expect(lock.extend(1_000)).rejects.toBeInstanceOf(RedisUnavailableError);
      // Checked at once (on a direct connection): it has run in Redis, and the renewal that
      // restores the lease comes later.
      expect(await redis.pttl(keyOf(key))).toBeLessThanOrEqual(1_000);
      expect(await overshoot(lock, key)).toBeLessThanOrEqual(0);
      proxy.setLatency(0);
      await lock.release();
    } finally {
      proxy.setLatency(0);
      await hasty.close();
    }
  });
});

describe('extend() bounds', () => {
  it('rejects a lease beyond what a timer can wait (2^31 - 1 ms), and sends nothing', async () => {
    const key = 'too-long';
    const lock = await locks.acquire(key);
    const sent = proxy.commands.length;
    for (const ms of [2 ** 31, 1e21]) {
      await expect(lock.extend(ms)).rejects.toThrow(RedisLockConfigError);
      await expect(lock.extend(ms)).rejects.toThrow(/2147483647/);
    }
    const tooLong = [String(2 ** 31), String(1e21)];
    expect(proxy.commands.slice(sent).some((args) => args.some((a) => tooLong.includes(a)))).toBe(
      false,
    );
    expect(await redis.pttl(keyOf(key))).toBeLessThanOrEqual(TTL);
    await lock.extend(2 ** 31 - 1); // the largest accepted
    expect(lock.isHeld).toBe(true);
    expect(await lock.release()).toBe(true);
  });
});
