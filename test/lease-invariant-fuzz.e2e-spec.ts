/**
 * The lease invariant, fuzzed: a handle's local deadline never lies beyond what Redis holds, and
 * nobody else acquires a key while its handle says it is held — with `extend()` calls racing the
 * watchdog's renewals, a short lease, the event loop blocked at random, and a TCP proxy adding
 * random latency to commands and replies. At random points it compares the handle's
 * `validUntil` with the key's PTTL on Redis (read on a direct connection), and lets a second
 * client try to take the key.
 *
 * Reproduce a run with `LEASE_FUZZ_SEED=<seed>`; `LEASE_FUZZ_MS` sets its length.
 */
import { LockService, type LockHandle } from 'nestjs-redis-lock';
import { onSharedRedis } from './support/lock-services';
import { SHARED_REDIS_URL } from './support/shared-redis';
import { closeAllProxies, startTcpProxy, type TcpProxy } from './support/tcp-proxy';
import { now, sleep } from './support/time';

const { prefix, redis, services, keyOf } = onSharedRedis('lease-fuzz');
const DURATION = Number(process.env.LEASE_FUZZ_MS ?? 12_000);
const SEED = Number(process.env.LEASE_FUZZ_SEED ?? Math.floor(Math.random() * 2 ** 31));
const KEYS = 4;
const TTL = 300;
/** PTTL is whole ms; the handle's deadline is fractional. */
const SLACK = 2;

let proxy: TcpProxy;
let holder: LockService;

beforeAll(async () => {
  proxy = await startTcpProxy(Number(new URL(SHARED_REDIS_URL).port || 6379));
  holder = new LockService({ redis: proxy.url, prefix, ttl: TTL, commandTimeout: 1_000 });
});

afterAll(async () => {
  proxy?.setLatency(0);
  await holder?.close();
  await closeAllProxies();
});

/** A small seeded PRNG (mulberry32), so a failing run can be replayed. */
function prng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

/** Event-loop lag: nothing else in this process runs (timers, replies, the proxy) meanwhile. */
function block(ms: number): void {
  const until = now() + ms;
  while (now() < until);
}

it(`keeps every held deadline within Redis' lease while extend() races renewals (seed ${SEED})`, async () => {
  const random = prng(SEED);
  const intruders = services.create();
  const held: (LockHandle | undefined)[] = new Array(KEYS);
  const inFlight = new Set<Promise<unknown>>();
  const stats = { checks: 0, extends: 0, lags: 0, intrusionTries: 0, losses: 0 };
  const violations: string[] = [];

  const check = async (lock: LockHandle, key: string): Promise<void> => {
    const before = now();
    const isHeld = lock.isHeld;
    const remaining = lock.validUntil - before;
    const pttl = await redis.pttl(keyOf(key));
    const elapsed = now() - before;
    stats.checks++;
    // Redis read the PTTL at most `elapsed` after `before`: its expiry is ≥ before + pttl.
    if (isHeld && remaining > Math.max(0, pttl) + elapsed + SLACK) {
      violations.push(
        `${key}: handle valid for ${remaining.toFixed(1)} ms, Redis PTTL ${pttl} ms (read in ${elapsed.toFixed(1)} ms)`,
      );
    }
  };

  const intrude = async (lock: LockHandle, key: string): Promise<void> => {
    stats.intrusionTries++;
    const intruder = await intruders.tryAcquire(key, { ttl: 100, renew: false });
    if (!intruder) return;
    if (lock.isHeld) violations.push(`${key}: acquired by another client while isHeld was true`);
    await intruder.release();
  };

  const until = now() + DURATION;
  while (now() < until && violations.length === 0) {
    const index = Math.floor(random() * KEYS);
    const key = `key-${index}`;
    let lock = held[index];
    if (!lock?.isHeld) {
      if (lock) stats.losses++; // lost under lag (or to an intruder after Redis let it go)
      lock = held[index] = await holder.acquire(key, { wait: 3_000 });
    }
    const action = random();
    if (action < 0.35) {
      // Not awaited: it races the watchdog's renewals and the other actions.
      stats.extends++;
      const extension = lock.extend(150 + Math.floor(random() * 1_200)).catch(() => undefined);
      inFlight.add(extension);
      void extension.then(() => inFlight.delete(extension));
    } else if (action < 0.55) {
      stats.lags++;
      block(Math.floor(random() * 25));
    } else if (action < 0.65) {
      proxy.setLatency(Math.floor(random() * 40));
    } else if (action < 0.7) {
      await intrude(lock, key);
    } else {
      await check(lock, key);
    }
    await sleep(random() * 10);
  }

  proxy.setLatency(0);
  await Promise.all([...inFlight]);
  await Promise.all(
    held.filter((lock) => lock !== undefined).map((lock) => lock.release().catch(() => false)),
  );

  expect(violations).toEqual([]);
  // The run did what it is for: many extensions racing renewals, checked many times.
  expect(stats.extends).toBeGreaterThan(50);
  expect(stats.checks).toBeGreaterThan(50);
}, 60_000);
