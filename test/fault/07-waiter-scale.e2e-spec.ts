/**
 * Scenario 7 — many waiters in one process: 10,000 waiters on 10,000 distinct keys plus 1,000
 * waiters on one key. They share ONE subscriber connection, none gives up on its subscription
 * ("subscribe timeout"), every one acquires once its key is released, and afterwards the server
 * has no channel left (PUBSUB CHANNELS / NUMSUB back to zero) and the process holds no more timers,
 * sockets or listeners than before (`process.getActiveResourcesInfo()` back to baseline).
 */
import { Logger } from '@nestjs/common';
import Redis from 'ioredis';
import { getEventListeners, setMaxListeners } from 'node:events';
import { LockService, type LockHandle } from 'nestjs-redis-lock';
import { hostProcess } from '../support/host-process';
import { startRedis, stopAllRedis, type RedisServer } from '../support/redis-server';
import { now, waitFor } from '../support/time';
import { lockKeys, ms, observe, percentile } from './fault-support';

const PREFIX = 'scale:';
const DISTINCT = 10_000;
const SAME_KEY = 1_000;
const WAIT = 60_000;
/** Waiters arrive in batches (a burst of 10,000 in one tick is CPU time, not a Redis test). */
const BATCH = Number(process.env.SCALE_BATCH ?? 2_500);

let server: RedisServer;
let redis: Redis;
let holders: LockService;
let waiters: LockService;

beforeAll(async () => {
  server = await startRedis();
  redis = new Redis(server.url);
  // Leases far longer than the test: a waiter that missed its message would time out, not recover.
  // commandTimeout is raised because it is measured in the client: a burst of thousands of commands
  // queued behind each other on a busy 2-core machine is CPU time here, not Redis being away.
  const options = { redis: server.url, prefix: PREFIX, ttl: 120_000, commandTimeout: 30_000 };
  holders = new LockService(options);
  waiters = new LockService(options);
});

afterAll(async () => {
  await holders?.close();
  await waiters?.close();
  redis?.disconnect();
  await stopAllRedis();
});

/** Counts of each resource type keeping the process alive, e.g. { Timeout: 2, TCPSocketWrap: 5 }. */
function activeResources(): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const type of hostProcess.getActiveResourcesInfo()) counts[type] = (counts[type] ?? 0) + 1;
  return counts;
}

/** Channels with at least one subscriber on the server (INFO's count: cheaper than the list). */
async function channelCount(): Promise<number> {
  return Number(/pubsub_channels:(\d+)/.exec(await redis.info('stats'))?.[1]);
}

async function pubsubConnections(): Promise<{ count: number; subscriptions: number[] }> {
  const list = String(await redis.call('CLIENT', 'LIST', 'TYPE', 'pubsub'));
  const lines = list.split('\n').filter((line) => line.trim().length > 0);
  return {
    count: lines.length,
    subscriptions: lines.map((line) => Number(/ sub=(\d+)/.exec(line)?.[1])),
  };
}

describe('scenario 7: 10,000 waiters on distinct keys + 1,000 on one key, in one process', () => {
  it('shares one subscriber, wakes every waiter, and leaves nothing behind', async () => {
    const warn = jest.spyOn(Logger.prototype, 'warn');
    // Warm up both services (connections, subscriber, scripts) before taking the baseline.
    const warm = await holders.acquire('warm-up');
    const warmWaiter = waiters.acquire('warm-up', { wait: 5_000 });
    await waitFor(async () => (await channelCount()) === 1);
    await warm.release();
    await (await warmWaiter).release();
    await waitFor(async () => (await channelCount()) === 0);
    const baseline = activeResources();

    const distinctKeys = Array.from({ length: DISTINCT }, (_, i) => `distinct:${i}`);
    const held: LockHandle[] = [];
    for (let i = 0; i <= DISTINCT; i += BATCH) {
      const batch = [...distinctKeys, 'hot'].slice(i, i + BATCH);
      held.push(...(await Promise.all(batch.map((key) => holders.acquire(key)))));
    }

    // Never aborted: their listeners must all go. A hundred waiters share each signal — not all
    // of them one: Node's EventTarget checks every listener on each add, quadratic in the count.
    const signals = Array.from({ length: (DISTINCT + SAME_KEY) / 100 }, () => {
      const signal = new AbortController().signal;
      setMaxListeners(100, signal);
      return signal;
    });
    let waiterCount = 0;
    const nextSignal = (): AbortSignal => signals[waiterCount++ % signals.length]!;
    const started = now();
    const released = new Map<string, number>();
    const wakeUps: number[] = [];
    const distinct: Promise<void>[] = [];
    const sameKey: Promise<void>[] = [];
    let handOffs = 0;
    for (let i = 0; i < DISTINCT; i += BATCH) {
      for (const key of distinctKeys.slice(i, i + BATCH)) {
        const acquiring = waiters.acquire(key, { wait: WAIT, signal: nextSignal() });
        distinct.push(
          acquiring.then(async (lock) => {
            // From the holder's release confirmed to this waiter holding the lock.
            wakeUps.push(Math.max(0, now() - (released.get(key) ?? now())));
            await lock.release();
          }),
        );
        distinct.at(-1)!.catch(() => undefined); // failures are asserted below, not unhandled
      }
      for (let j = 0; j < SAME_KEY / (DISTINCT / BATCH); j++) {
        const acquiring = waiters.acquire('hot', { wait: WAIT, signal: nextSignal() });
        sameKey.push(
          acquiring.then(async (lock) => {
            handOffs++;
            await lock.release(); // hands the key to the next waiter
          }),
        );
        sameKey.at(-1)!.catch(() => undefined);
      }
      await waitFor(async () => (await channelCount()) === i + BATCH + 1, 10_000, 20);
    }

    // Every waiter's channel is subscribed, all on one connection.
    const subscribedAfter = now() - started;
    const connections = await pubsubConnections();
    expect(connections).toEqual({ count: 1, subscriptions: [DISTINCT + 1] });
    const listening = (): number =>
      signals.reduce((sum, signal) => sum + getEventListeners(signal, 'abort').length, 0);
    expect(listening()).toBeGreaterThan(0);

    const releasing = now();
    await Promise.all(held.map((lock) => lock.release().then(() => released.set(lock.key, now()))));
    await Promise.all(distinct);
    const distinctDone = now() - releasing;
    await Promise.all(sameKey);
    const allDone = now() - releasing;
    expect(wakeUps).toHaveLength(DISTINCT);
    expect(handOffs).toBe(SAME_KEY);

    // Nothing left: no channel, no lock, no listener, no timer or socket beyond the baseline.
    await waitFor(async () => (await channelCount()) === 0, 10_000);
    expect(await redis.pubsub('CHANNELS', `${PREFIX}*`)).toEqual([]);
    const [, numsub] = (await redis.pubsub('NUMSUB', lockKeys(PREFIX, 'hot').channel)) as [
      string,
      number,
    ];
    expect(Number(numsub)).toBe(0);
    // With no channel left the subscriber connection is an ordinary one again.
    expect((await pubsubConnections()).count).toBe(0);
    expect(
      await redis.exists(lockKeys(PREFIX, 'hot').lock, lockKeys(PREFIX, 'distinct:0').lock),
    ).toBe(0);
    expect(listening()).toBe(0);
    // No more of any kind than at the baseline: a leak adds; a timer of an earlier suite in this
    // process (jest runs files in one process) may end meanwhile, which is not ours to count.
    const beyondBaseline = (): Record<string, number> =>
      Object.fromEntries(
        Object.entries(activeResources()).filter(([type, n]) => n > (baseline[type] ?? 0)),
      );
    await waitFor(() => Object.keys(beyondBaseline()).length === 0, 2_000).catch(() => undefined);
    expect(beyondBaseline()).toEqual({});
    const subscribeWarnings = warn.mock.calls.filter(([message]) =>
      /subscri/i.test(String(message)),
    );
    expect(subscribeWarnings).toEqual([]);
    warn.mockRestore();

    observe('7-scale', {
      distinct: DISTINCT,
      sameKey: SAME_KEY,
      subscriberConnections: connections.count,
      allSubscribedAfter: ms(subscribedAfter),
      distinctAllAcquiredAfterRelease: ms(distinctDone),
      distinctWakeP50: ms(percentile(wakeUps, 50)),
      distinctWakeP99: ms(percentile(wakeUps, 99)),
      sameKeyChainDone: ms(allDone),
      subscribeWarnings: subscribeWarnings.length,
      resourcesAfter: activeResources(),
    });
  }, 90_000);
});
