/**
 * Waiting is fast and bounded: woken by the release notification, else retried at the
 * holder's lease end; `wait` is a budget; an AbortSignal cancels; fences increase per key.
 */
import Redis from 'ioredis';
import { LockNotAcquiredError, RedisUnavailableError, type LockHandle } from 'nestjs-redis-lock';
import { startRedis, stopAllRedis, type RedisServer } from './support/redis-server';
import { now, sleep, waitFor } from './support/time';
import { lockServices, onSharedRedis, redisKeyOf } from './support/lock-services';

const { redis, services, keyOf } = onSharedRedis('waiting');

describe('waiting for a busy lock', () => {
  it('hands the lock to a waiter as soon as the holder releases, long before its lease ends', async () => {
    const holderService = services.create();
    const waiterService = services.create();
    const events: string[] = [];
    const holder = await holderService.acquire('handoff', { ttl: 10_000 });

    const waiting = waiterService.acquire('handoff', { wait: 5_000 }).then((lock) => {
      events.push('waiter acquired');
      return { lock, at: now() };
    });
    await sleep(200);
    events.push('holder releasing');
    const releasedAt = now();
    expect(await holder.release()).toBe(true);
    const { lock, at } = await waiting;

    expect(events).toEqual(['holder releasing', 'waiter acquired']);
    // The holder's lease had ~9.8 s left: only the release message explains a quick hand-off.
    expect(at - releasedAt).toBeLessThan(1_000);
    expect(lock.fence).toBeGreaterThan(holder.fence);
    await lock.release();
  });

  it("retries at the end of the holder's lease when no release message comes (expiry)", async () => {
    const holderService = services.create();
    const waiterService = services.create();
    const ttl = 500;
    const sentAt = now();
    // A holder that never releases: its fixed lease simply expires.
    const holder = await holderService.acquire('expiry', { ttl, renew: false });

    const lock = await waiterService.acquire('expiry', { wait: 3_000 });
    const acquiredAfter = now() - sentAt;
    // Not before the holder's lease ended on Redis (which started after `sentAt`)…
    expect(acquiredAfter).toBeGreaterThanOrEqual(ttl - 5);
    // …and within the holder's PTTL plus jitter (generous slack for a busy machine), not at the
    // end of the 3 s budget.
    expect(acquiredAfter).toBeLessThan(ttl + 500);
    // The holder's handle knows its lease ran out (local deadline), and its release says so.
    expect(holder.isHeld).toBe(false);
    expect(await holder.release()).toBe(false);
    expect(await redis.get(keyOf('expiry'))).toBe(lock.token);
    await lock.release();
  });

  it('gives up with LockNotAcquiredError when the wait budget runs out, saying when to retry', async () => {
    const holderService = services.create();
    const waiterService = services.create();
    const holder = await holderService.acquire('budget', { ttl: 10_000 });

    const started = now();
    const error: unknown = await waiterService.acquire('budget', { wait: 300 }).catch((e) => e);
    const waited = now() - started;

    expect(error).toBeInstanceOf(LockNotAcquiredError);
    const busy = error as LockNotAcquiredError;
    expect(busy.key).toBe('budget');
    expect(waited).toBeGreaterThanOrEqual(295);
    expect(waited).toBeLessThan(300 + 1_000);
    expect(busy.waitedMs).toBeGreaterThanOrEqual(295);
    expect(busy.retryAfterMs).toBeGreaterThan(8_000);
    expect(busy.retryAfterMs).toBeLessThanOrEqual(10_000);
    await holder.release();
  });

  it('fails at once with retryAfterMs when wait is 0 (the default)', async () => {
    const holder = await services.create().acquire('fail-fast', { ttl: 10_000 });
    const started = now();
    const error: unknown = await services
      .create()
      .acquire('fail-fast')
      .catch((e) => e);
    expect(error).toBeInstanceOf(LockNotAcquiredError);
    expect((error as LockNotAcquiredError).retryAfterMs).toBeGreaterThan(0);
    expect(now() - started).toBeLessThan(1_000);
    await holder.release();
  });

  it('stops waiting when the AbortSignal aborts, rejecting with its reason and leaving no lock behind', async () => {
    const holderService = services.create();
    const waiterService = services.create();
    const holder = await holderService.acquire('cancel', { ttl: 10_000 });
    const controller = new AbortController();
    const reason = new Error('client went away');

    const waiting = waiterService.acquire('cancel', { wait: 5_000, signal: controller.signal });
    await sleep(100);
    const abortedAt = now();
    controller.abort(reason);
    await expect(waiting).rejects.toBe(reason);
    expect(now() - abortedAt).toBeLessThan(1_000);

    // The cancelled waiter must not take the lock when it frees up.
    expect(await holder.release()).toBe(true);
    await sleep(200);
    expect(await redis.exists(keyOf('cancel'))).toBe(0);
  });

  it('rejects with the reason of an already-aborted signal and takes no lock', async () => {
    const reason = new Error('too late');
    await expect(
      services.create().acquire('pre-aborted', { signal: AbortSignal.abort(reason) }),
    ).rejects.toBe(reason);
    await sleep(50);
    expect(await redis.exists(keyOf('pre-aborted'))).toBe(0);
  });

  it('gives successive holders of a key strictly increasing fences', async () => {
    const instances = [services.create(), services.create()];
    const fences: number[] = [];
    for (let i = 0; i < 6; i++) {
      const lock: LockHandle = await instances[i % 2]!.acquire('fenced', { wait: 2_000 });
      fences.push(lock.fence);
      await lock.release();
    }
    // A lease that expired instead of being released counts as a holder too.
    const expired = await instances[0]!.acquire('fenced', { ttl: 100, renew: false });
    fences.push(expired.fence);
    const next = await instances[1]!.acquire('fenced', { wait: 2_000 });
    fences.push(next.fence);
    await next.release();

    for (let i = 1; i < fences.length; i++) expect(fences[i]).toBeGreaterThan(fences[i - 1]!);
  });
});

describe('a grant that lands after the caller gave up', () => {
  // A private redis-server, paused so the acquire command sits unanswered until we resume it.
  let server: RedisServer;
  let probe: Redis;
  let privateServices: ReturnType<typeof lockServices>;
  const privatePrefix = 'late-grant:';

  beforeAll(async () => {
    server = await startRedis();
    probe = new Redis(server.url);
    privateServices = lockServices({
      redis: server.url,
      prefix: privatePrefix,
      commandTimeout: 300,
    });
  });

  afterAll(async () => {
    if (server?.running) server.resume();
    await privateServices?.closeAll();
    probe?.disconnect();
    await stopAllRedis();
  });

  it.each([
    ['cancelled by its AbortSignal', 'cancelled', true],
    ['timed out (commandTimeout)', 'timed-out', false],
  ])('is released at once when the acquire was %s', async (_, key, cancel) => {
    const locks = privateServices.create();
    await locks.isLocked(key); // connected and ready before the pause
    const controller = new AbortController();
    const reason = new Error('gave up');

    server.pause();
    try {
      const acquiring = locks.acquire(key, { wait: 5_000, signal: controller.signal });
      if (cancel) setTimeout(() => controller.abort(reason), 100);
      const error: unknown = await acquiring.catch((e) => e);
      if (cancel) expect(error).toBe(reason);
      else expect(error).toBeInstanceOf(RedisUnavailableError);
    } finally {
      server.resume();
    }

    // The server did grant it once resumed (the fence counter moved), and the grant was undone.
    const fenceKey = `${redisKeyOf(privatePrefix, key)}:fence`;
    await waitFor(async () => (await probe.exists(fenceKey)) === 1);
    await waitFor(async () => (await probe.exists(redisKeyOf(privatePrefix, key))) === 0, 1_000);
  });
});
