/**
 * Fair mode with `renew: false`: a lock handed over to a waiter is brought to its full ttl by one
 * extension before `acquire` resolves. When Redis does not answer that extension (the proxy drops
 * its reply), the call must not leave a handle behind (it would report a spurious loss at its
 * deadline), and a call that gives up must leave the queue and free the lock it was handed,
 * instead of stranding it for the whole ttl.
 */
import Redis from 'ioredis';
import { performance } from 'node:perf_hooks';
import { LockService, RedisUnavailableError, type LockLostError } from 'nestjs-redis-lock';
import { useClockSource } from '../lib/util/clock';
import { lockCommand } from './fault/fault-support';
import { CONNECT_BUDGET, redisKeyOf } from './support/lock-services';
import { startRedis, stopAllRedis, type RedisServer } from './support/redis-server';
import { closeAllProxies, startTcpProxy } from './support/tcp-proxy';
import { sleep, waitFor } from './support/time';

const prefix = 'fair-adopt:';
const COMMAND_TIMEOUT = 300;
let server: RedisServer;
let redis: Redis;
const services: LockService[] = [];

function service(redisUrl: string): LockService {
  const created = new LockService({
    redis: redisUrl,
    prefix,
    fair: true,
    commandTimeout: COMMAND_TIMEOUT,
    shutdownGrace: 0,
  });
  services.push(created);
  return created;
}

beforeAll(async () => {
  server = await startRedis();
  redis = new Redis(server.url);
});

afterAll(async () => {
  await Promise.all(services.map((s) => s.close()));
  await closeAllProxies();
  redis?.disconnect();
  await stopAllRedis();
});

/** Resolves once `key`'s queue holds `count` waiters. */
const queued = (key: string, count: number): Promise<void> =>
  waitFor(async () => (await redis.zcard(`${redisKeyOf(prefix, key)}:queue`)) === count, 5_000, 2);

describe("fair mode, renew: false, Redis silent on the hand-off's extension", () => {
  for (const how of ['grant message', 'refresh try'] as const) {
    it(`reports no loss, surfaces the error, and frees the lock (handed over, found by its ${how})`, async () => {
      const key = `adopt-${how.replace(' ', '-')}`;
      const holder = await service(server.url).acquire(key, CONNECT_BUDGET);
      const proxy = await startTcpProxy(server.port);
      const waiters = service(proxy.url);
      const lost: LockLostError[] = [];
      waiters.on('lost', (error) => lost.push(error));
      if (how === 'refresh try') {
        // No release message reaches the waiter: it finds the hand-off at its next queue refresh.
        void proxy.dropReplyTo((args) => args[0] === 'subscribe', 'stall');
      }
      const extension = proxy.dropReplyTo(lockCommand.extend(prefix, key), 'stall');
      const call = waiters
        .acquire(key, { wait: 1_500, ttl: 20_000, renew: false })
        .catch((error: unknown) => error);
      await queued(key, 1);
      await holder.release(); // hands the lock to the waiter, with a 1 s lease
      await extension; // ran on Redis (the lease is now 20 s), its reply dropped
      const outcome = await call;
      expect(outcome).toBeInstanceOf(RedisUnavailableError);
      proxy.heal(); // the stalled connection ends; what it held back is re-sent
      // A third service gets the lock once the waiter's leave reaches Redis, not after 20 s.
      const next = await service(server.url).acquire(key, { wait: 5_000 });
      await sleep(1_200); // past the 1 s deadline the handed-over lease had
      expect(lost).toEqual([]);
      expect(await next.release()).toBe(true);
    });
  }
});

describe('fair mode, renew: false, the hand-off lost while its extension is in flight', () => {
  it('reports no loss of a lock nobody was given, and the call goes on to take the lock', async () => {
    let skew = 0;
    useClockSource({ monotonic: () => performance.now(), wall: () => Date.now() + skew });
    try {
      const key = 'adopt-lost';
      const holder = await service(server.url).acquire(key, CONNECT_BUDGET);
      const proxy = await startTcpProxy(server.port);
      const waiters = service(proxy.url);
      const lost: LockLostError[] = [];
      waiters.on('lost', (error) => lost.push(error));
      // The host is suspended while the extension is on its way: the 1 s lease handed over is
      // used up by the time its answer is read, so the extension fails with LockLostError.
      const extension = proxy.onCommand(lockCommand.extend(prefix, key), 'request', () => {
        skew += 5_000;
      });
      const call = waiters.acquire(key, { wait: 3_000, ttl: 20_000, renew: false });
      await queued(key, 1);
      await holder.release(); // hands the lock to the waiter, with a 1 s lease
      await extension;
      const lock = await call;
      expect(lost).toEqual([]);
      expect(lock.isHeld).toBe(true);
      expect(lock.fence).toBeGreaterThan(holder.fence + 1); // taken again, after the lost hand-off
      expect(await lock.release()).toBe(true);
    } finally {
      useClockSource();
    }
  });
});
