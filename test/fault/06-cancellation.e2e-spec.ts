/**
 * Scenario 6 — cancellation races: an AbortSignal fired at random points of an acquire (before
 * the command, while it is in flight, while subscribing, while waiting, exactly when the server's
 * grant is on its way back), and release() racing the watchdog's renewal. Afterwards no lock key
 * remains and none has its TTL refreshed (PTTL polled over three renewal periods).
 */
import Redis from 'ioredis';
import { LockService } from 'nestjs-redis-lock';
import { startRedis, stopAllRedis, type RedisServer } from '../support/redis-server';
import { closeAllProxies, startTcpProxy, type TcpProxy } from '../support/tcp-proxy';
import { now, sleep, waitFor } from '../support/time';
import {
  leaseKeysUnder,
  lockCommand,
  lockKeys,
  observe,
  outcome,
  watchLeases,
} from './fault-support';

const PREFIX = 'cancel:';
const TTL = 300; // renewal every 100 ms
const ROUNDS = 150;

let server: RedisServer;
let redis: Redis;
let proxy: TcpProxy;
let locks: LockService;
let holders: LockService;

beforeAll(async () => {
  server = await startRedis();
  redis = new Redis(server.url);
  proxy = await startTcpProxy(server.port);
  locks = new LockService({ redis: proxy.url, prefix: PREFIX, ttl: TTL, retryJitter: 5 });
  holders = new LockService({ redis: server.url, prefix: PREFIX, ttl: TTL });
  // Load every script (acquire, extend, release), so what the proxy sees is what runs: a
  // NOSCRIPT answer makes the library send the command again as EVAL. A long lease and a wait:
  // connecting plus a first EVAL can outlast TTL on a loaded machine, losing the lease before
  // extend() runs.
  const warmUp = await locks.acquire('warm-up', { ttl: 10_000, wait: 10_000 });
  await warmUp.extend();
  await warmUp.release();
});

afterAll(async () => {
  proxy?.heal(); // a failed test must not leave the service unreachable
  await locks?.close();
  await holders?.close();
  await closeAllProxies();
  redis?.disconnect();
  await stopAllRedis();
});

/** No lease key is left under the prefix, and none gets renewed for three renewal periods. */
async function expectNothingLeftOrRenewed(): Promise<void> {
  await waitFor(async () => (await leaseKeysUnder(redis, PREFIX)).length === 0, TTL + 200);
  const { refreshed, remaining } = await watchLeases(redis, PREFIX, TTL);
  expect(refreshed).toEqual([]);
  expect(remaining).toEqual([]);
}

describe('scenario 6: AbortSignal racing the acquire', () => {
  it('an acquire cancelled while the server grant is on its way back is released at once', async () => {
    const controller = new AbortController();
    void proxy.onCommand(lockCommand.acquire(PREFIX, 'granted-then-cancelled'), 'reply', () =>
      controller.abort(new Error('cancelled')),
    );
    // A long lease, so "freed at once" cannot be mistaken for "expired" even on a stalled loop.
    const ttl = 10_000;
    const result = await outcome(
      locks.acquire('granted-then-cancelled', { signal: controller.signal, ttl }),
    );
    const rejectedAt = now();
    expect(result.ok).toBe(false);
    expect((result as { error: Error }).error.message).toBe('cancelled');
    // The server granted it; the library deletes that grant instead of letting it run its TTL.
    await waitFor(
      async () => (await redis.exists(lockKeys(PREFIX, 'granted-then-cancelled').lock)) === 0,
      ttl / 2,
      2,
    );
    const freedAfter = now() - rejectedAt;
    expect(freedAfter).toBeLessThan(ttl / 2);
    await expectNothingLeftOrRenewed();
    observe('6-grant-in-flight', { freedAfterReject: Math.round(freedAfter) });
  });

  it('an abort while the waiter is still subscribing cancels at once, sending nothing more', async () => {
    const key = 'abort-while-subscribing';
    const held = await holders.acquire(key);
    const controller = new AbortController();
    // The subscription never gets its confirmation: the link stalls just as it is sent.
    void proxy.onCommand(
      (args) => args[0] === 'subscribe' && args[1] === lockKeys(PREFIX, key).channel,
      'request',
      () => proxy.blackhole(),
    );
    const attempt = outcome(locks.acquire(key, { wait: 5_000, signal: controller.signal }));
    await waitFor(() => proxy.commands.some((args) => args[0] === 'subscribe'), 2_000, 2);
    const sentBefore = proxy.commands.length;
    const abortedAt = now();
    controller.abort(new Error('cancelled'));
    const result = await attempt;
    const took = now() - abortedAt;
    const sentAfter = proxy.commands.slice(sentBefore).filter(lockCommand.acquire(PREFIX, key));
    proxy.heal();
    await held.release();
    observe('6-abort-while-subscribing', {
      rejectedAfter: Math.round(took),
      acquiresSentAfterAbort: sentAfter.length,
    });
    expect(result.ok).toBe(false);
    expect((result as { error: Error }).error.message).toBe('cancelled');
    expect(took).toBeLessThan(100); // not after commandTimeout (2 s)
    expect(sentAfter).toEqual([]);
  });

  it('a waiter cancelled as the hand-off grant comes back releases it to the next waiter', async () => {
    const key = 'handoff-cancelled';
    const held = await holders.acquire(key);
    const controller = new AbortController();
    // The cancelled waiter's grant would last 10 s: only a release explains a quick successor.
    const ttl = 10_000;
    const cancelled = outcome(locks.acquire(key, { wait: 3_000, signal: controller.signal, ttl }));
    const next = holders.acquire(key, { wait: ttl });
    await sleep(50);
    // Cancel exactly when the retry that wins the released lock gets its grant back.
    void proxy.onCommand(lockCommand.acquire(PREFIX, key), 'reply', () => controller.abort());
    await held.release();
    expect((await cancelled).ok).toBe(false);
    const started = now();
    const successor = await next;
    expect(now() - started).toBeLessThan(ttl / 2);
    await successor.release();
    await expectNothingLeftOrRenewed();
  });

  it(`${ROUNDS} aborts at random points leave no lock behind and renew nothing`, async () => {
    const counts = { acquired: 0, aborted: 0, busy: 0, other: 0 };
    for (let round = 0; round < ROUNDS; round++) {
      const key = `random:${round % 10}`;
      const contended = round % 2 === 0;
      const held = contended ? await holders.acquire(key) : undefined;
      const controller = new AbortController();
      const point = round % 5;
      if (point === 0) controller.abort(); // before anything is sent
      const attempt = locks.acquire(key, { wait: 200, signal: controller.signal });
      if (point === 1) queueMicrotask(() => controller.abort()); // command just sent
      if (point === 2) setImmediate(() => controller.abort()); // reply may be on its way
      if (point >= 3) setTimeout(() => controller.abort(), Math.random() * 4);
      if (held) setTimeout(() => void held.release(), Math.random() * 4);
      const result = await outcome(attempt);
      if (result.ok) {
        counts.acquired++;
        await result.value.release();
      } else if (result.error === controller.signal.reason) counts.aborted++;
      else if ((result.error as Error).name === 'LockNotAcquiredError') counts.busy++;
      else counts.other++;
      if (held) await held.release();
    }
    expect(counts.other).toBe(0);
    expect(counts.aborted).toBeGreaterThan(0);
    await expectNothingLeftOrRenewed();
    observe('6-random-aborts', { rounds: ROUNDS, ...counts });
  });
});

describe('scenario 6: release() racing the watchdog', () => {
  /** Rounds on distinct keys, all at once: release() exactly when a renewal is sent / confirmed. */
  const race = (at: 'request' | 'reply', rounds: number): Promise<void[]> =>
    Promise.all(
      Array.from({ length: rounds }, async (_, round) => {
        const key = `renewal-race:${at}:${round}`;
        const lock = await locks.acquire(key);
        let released: Promise<boolean> | undefined;
        await proxy.onCommand(lockCommand.extend(PREFIX, key), at, () => {
          released = lock.release();
        });
        expect(await released).toBe(true);
      }),
    );

  it('release() while a renewal is in flight: no key remains, nothing renewed after', async () => {
    const before = proxy.commands.length;
    await Promise.all([race('request', 10), race('reply', 10)]);
    await expectNothingLeftOrRenewed();
    // After each release, no renewal of that key went out again.
    const sent = proxy.commands.slice(before);
    for (let round = 0; round < 10; round++) {
      for (const at of ['request', 'reply']) {
        const key = `renewal-race:${at}:${round}`;
        const releasedAt = sent.findIndex(lockCommand.release(PREFIX, key));
        expect(releasedAt).toBeGreaterThan(0);
        // An EVAL after it can only be the NOSCRIPT re-send of the renewal EVALSHA sent before it
        // (refused unrun on a server that had not seen the script yet): its compare finds our key
        // gone, as expectNothingLeftOrRenewed() checked. No new renewal went out.
        const renewedAfter = sent
          .slice(releasedAt)
          .filter((args) => args[0] === 'evalsha')
          .some(lockCommand.extend(PREFIX, key));
        expect(renewedAfter).toBe(false);
      }
    }
  });

  it('release() at random times around the renewal tick leaves nothing renewed', async () => {
    const held = await Promise.all(
      Array.from({ length: 40 }, (_, i) => locks.acquire(`tick:${i}`)),
    );
    await Promise.all(
      held.map(async (lock) => {
        await sleep(TTL / 3 - 10 + Math.random() * 20);
        expect(await lock.release()).toBe(true);
      }),
    );
    await expectNothingLeftOrRenewed();
  });
});
