/**
 * Scenario 5 — the release message never arrives: the waiter's subscriber connection is killed
 * (`CLIENT KILL TYPE pubsub`) just before the holder releases, or the holder never releases and
 * its key simply expires. Waiters still acquire — as soon as the subscriber connection is back
 * (which wakes every waiter to try again: a release may have been missed), well within the
 * holder's PTTL — and the next hand-off is woken by its message again.
 */
import Redis from 'ioredis';
import { LockService, type LockHandle } from 'nestjs-redis-lock';
import { startRedis, stopAllRedis, type RedisServer } from '../support/redis-server';
import { now, sleep, waitFor } from '../support/time';
import { lockKeys, ms, observe } from './fault-support';

const PREFIX = 'lost-message:';
const TTL = 1_000;
const JITTER = 10;
/** Timer and scheduling slack on a busy 2-core machine (a stalled event loop, a GC pause). */
const SLACK = 400;
/** A wake-up by message: ~1 ms, but far below the 1 s lease the fallback timer would wait. */
const WOKEN_BY_MESSAGE = 500;

let server: RedisServer;
let redis: Redis;
let holders: LockService;
let waiters: LockService;

beforeAll(async () => {
  server = await startRedis();
  redis = new Redis(server.url);
  holders = new LockService({ redis: server.url, prefix: PREFIX, ttl: TTL });
  waiters = new LockService({ redis: server.url, prefix: PREFIX, retryJitter: JITTER });
});

afterAll(async () => {
  await holders?.close();
  await waiters?.close();
  redis?.disconnect();
  await stopAllRedis();
});

/** Subscribers of `key`'s release channel on the server right now. */
async function subscribers(key: string): Promise<number> {
  const [, count] = (await redis.pubsub('NUMSUB', lockKeys(PREFIX, key).channel)) as [
    string,
    number,
  ];
  return Number(count);
}

/** Pub/sub client connections on the server (`CLIENT LIST TYPE pubsub`). */
async function pubsubClients(): Promise<string[]> {
  const list = String(await redis.call('CLIENT', 'LIST', 'TYPE', 'pubsub'));
  return list.split('\n').filter((line) => line.trim().length > 0);
}

/**
 * Starts a waiter on `key` and resolves once its subscription is live on the server, with the
 * waiter's acquisition (wrapped: an async function would adopt the promise and wait for it).
 */
async function subscribedWaiter(
  key: string,
): Promise<{ acquired: Promise<{ lock: LockHandle; at: number }> }> {
  const acquired = waiters.acquire(key, { wait: 5_000 }).then((lock) => ({ lock, at: now() }));
  await waitFor(async () => (await subscribers(key)) === 1, 3_000);
  return { acquired };
}

describe('scenario 5: a release message that never arrives', () => {
  it('with the message: the waiter is woken at once (control)', async () => {
    const held = await holders.acquire('control');
    const { acquired: waiting } = await subscribedWaiter('control');
    const releasedAt = now();
    await held.release();
    const { lock, at } = await waiting;
    expect(at - releasedAt).toBeLessThan(WOKEN_BY_MESSAGE);
    await lock.release();
    observe('5-control', { wokenAfter: ms(at - releasedAt) });
  });

  it('subscriber killed before the release: acquires once it reconnects, not at the holder PTTL, then recovers', async () => {
    const held = await holders.acquire('killed');
    const { acquired: waiting } = await subscribedWaiter('killed');
    const pttl = await redis.pttl(lockKeys(PREFIX, 'killed').lock);

    // The subscriber reconnects after ~50 ms: a release now publishes to nobody.
    expect(Number(await redis.call('CLIENT', 'KILL', 'TYPE', 'pubsub'))).toBe(1);
    const releasedAt = now();
    await held.release();
    expect(await subscribers('killed')).toBe(0); // the message went nowhere
    const { lock, at } = await waiting;
    const latency = at - releasedAt;
    expect(latency).toBeLessThan(pttl + JITTER + SLACK);
    // Woken by its subscriber's reconnection (~50 ms), not by its fallback at the holder's PTTL.
    expect(latency).toBeLessThan(WOKEN_BY_MESSAGE);
    await lock.release();

    // Recovered: one subscriber connection again, and the next hand-off is woken by its message.
    const next = await holders.acquire('killed');
    const { acquired: again } = await subscribedWaiter('killed');
    expect(await pubsubClients()).toHaveLength(1);
    const releasedAgainAt = now();
    await next.release();
    const woken = await again;
    expect(woken.at - releasedAgainAt).toBeLessThan(WOKEN_BY_MESSAGE);
    await woken.lock.release();

    observe('5-client-kill', {
      holderPttl: pttl,
      acquiredAfterRelease: ms(latency),
      afterRecoveryWokenIn: ms(woken.at - releasedAgainAt),
    });
  });

  it('key expiry instead of release: acquires within jitter of the expiry, never before it', async () => {
    // The grant happened on Redis between `sentAt` and `grantedAt`. Its lease cannot end before
    // `sentAt` + 800, and a stalled event loop can only make `grantedAt` late, never early: so
    // `sentAt` bounds the exclusion check and `grantedAt` bounds the hand-off latency.
    const sentAt = now();
    const held = await holders.acquire('expired', { ttl: 800, renew: false });
    const grantedAt = now();
    const { acquired: waiting } = await subscribedWaiter('expired');
    const { lock, at } = await waiting;
    expect(at - sentAt).toBeGreaterThanOrEqual(800 - 2); // exclusion: not before the lease ended
    const after = at - grantedAt;
    expect(after).toBeLessThan(800 + JITTER + SLACK);
    expect(await held.release()).toBe(false);
    await lock.release();
    observe('5-expiry', { ttl: 800, acquiredAfterGrant: ms(after), afterExpiry: ms(after - 800) });
  });

  it('keeps one subscriber connection for all keys, and releases its channels afterwards', async () => {
    const keys = ['a', 'b', 'c', 'd'];
    const held = await Promise.all(keys.map((key) => holders.acquire(`multi:${key}`)));
    const waiting = keys.map((key) => waiters.acquire(`multi:${key}`, { wait: 5_000 }));
    await waitFor(async () => {
      const counts = await Promise.all(keys.map((key) => subscribers(`multi:${key}`)));
      return counts.every((count) => count === 1);
    }, 3_000);
    expect(await pubsubClients()).toHaveLength(1);
    await Promise.all(held.map((lock) => lock.release()));
    for (const lock of await Promise.all(waiting)) await lock.release();
    await waitFor(async () => {
      const counts = await Promise.all(keys.map((key) => subscribers(`multi:${key}`)));
      return counts.every((count) => count === 0);
    }, 3_000);
    await sleep(10);
  });
});
