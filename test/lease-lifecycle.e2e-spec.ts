/**
 * The lease after acquire: a shortened `extend()` is renewed at its new length, a fixed lease
 * (`renew: false`) that runs out is reported without anyone reading its signal, and a throwing
 * `'lost'` listener does not stop the watchdog.
 */
import { LockLostError } from 'nestjs-redis-lock';
import { sleep, waitFor } from './support/time';
import { onSharedRedis } from './support/lock-services';

const { redis, services, keyOf } = onSharedRedis('lease-lifecycle');

it('renews a lease shortened by extend() at its new length, so nobody else gets in', async () => {
  const lock = await services.create().acquire('shortened', { ttl: 30_000 });
  await lock.extend(600);
  expect(await redis.pttl(keyOf('shortened'))).toBeLessThanOrEqual(600);
  const other = services.create();
  for (let i = 0; i < 8; i++) {
    await sleep(200); // 1.6 s in all: without renewal the 600 ms lease would have run out
    expect(await other.tryAcquire('shortened')).toBeNull();
  }
  expect(lock.isHeld).toBe(true);
  expect(await lock.release()).toBe(true);
});

it('reports a fixed lease (renew: false) that ran out before its release, unasked', async () => {
  const locks = services.create();
  const lost: LockLostError[] = [];
  locks.on('lost', (error) => lost.push(error));
  const lock = await locks.acquire('fixed', { ttl: 200, renew: false });
  let aborted = false;
  lock.signal.addEventListener('abort', () => (aborted = true));
  await waitFor(() => lost.length === 1, 2_000); // nobody reads the signal meanwhile
  expect(aborted).toBe(true);
  expect(lost[0]!.reason).toBe('deadline');
  expect(await lock.release()).toBe(false);
});

it("keeps renewing the other locks when a 'lost' listener throws", async () => {
  const locks = services.create({ ttl: 600 });
  locks.on('lost', () => {
    throw new Error('listener bug');
  });
  const kept = await locks.acquire('kept');
  const doomed = await locks.acquire('doomed');
  await services.create().forceRelease('doomed'); // found at the next renewal
  await waitFor(() => doomed.signal.aborted, 2_000);
  await sleep(1_300); // more than two leases of the kept lock
  expect(kept.isHeld).toBe(true);
  expect(await redis.get(keyOf('kept'))).toBe(kept.token);
  expect(await kept.release()).toBe(true);
});

it('close() with an acquire in flight and nothing held: the late grant is freed, not stranded', async () => {
  for (const fair of [false, true]) {
    const locks = services.create({ fair });
    const key = `closing-${fair ? 'fair' : 'plain'}`;
    const call = locks.acquire(key, { ttl: 10_000 }).catch((error: unknown) => error); // sent
    await locks.close();
    expect(String(await call)).toMatch(/shutting down/);
    // Freed before close() returned, not left for its 10 s lease.
    expect(await redis.exists(keyOf(key))).toBe(0);
  }
});
