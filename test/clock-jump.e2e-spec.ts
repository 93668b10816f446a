/**
 * A suspended host (a laptop's lid closed, a paused VM, a restored snapshot) stops the monotonic
 * clock, while Redis keeps expiring keys. The handle therefore also watches the wall clock: when
 * it jumps ahead of the monotonic one, that time is taken off the lease, and a lease it used up is
 * lost (reason `'clock-jump'`). A step of the wall clock backwards never lengthens a lease. The
 * clocks are injected (the `useClockSource` seam): real suspension cannot be scripted in a test.
 */
import { performance } from 'node:perf_hooks';
import { LockLostError } from 'nestjs-redis-lock';
import { useClockSource } from '../lib/util/clock';
import { onSharedRedis } from './support/lock-services';
import { sleep, waitFor } from './support/time';

const { redis, services, keyOf } = onSharedRedis('clock-jump');
/** How far the injected wall clock is ahead of the real one. */
let skew = 0;

beforeEach(() => {
  skew = 0;
  useClockSource({ monotonic: () => performance.now(), wall: () => Date.now() + skew });
});

afterAll(() => useClockSource());

it('treats a wall-clock jump past the lease as suspension: signal aborted, loss reported, key released', async () => {
  const locks = services.create({ ttl: 2_000 });
  const lost: LockLostError[] = [];
  locks.on('lost', (error) => void lost.push(error));
  const lock = await locks.acquire('suspended');

  skew += 5_000; // the host slept 5 s; Redis' 2 s lease ran out meanwhile

  expect(lock.isHeld).toBe(false);
  const reason = lock.signal.reason as LockLostError;
  expect(reason).toBeInstanceOf(LockLostError);
  expect(reason.reason).toBe('clock-jump');
  expect(lost.map((error) => error.reason)).toEqual(['clock-jump']);
  // Released (compare-and-delete), in case Redis did not see that time pass after all.
  await waitFor(async () => (await redis.exists(keyOf('suspended'))) === 0, 1_000);
  expect(await lock.release()).toBe(false);
});

it('takes a shorter jump off the deadline, and the next renewal restores the lease', async () => {
  const locks = services.create({ ttl: 3_000 });
  const lock = await locks.acquire('dozed');
  const before = lock.validUntil;

  skew += 1_500;

  expect(lock.isHeld).toBe(true);
  expect(lock.validUntil).toBeLessThanOrEqual(before - 1_500 + 1);
  await waitFor(() => lock.validUntil > before, 3_000);
  expect(lock.isHeld).toBe(true);
  expect(await lock.release()).toBe(true);
});

it('never lengthens a lease when the wall clock steps back', async () => {
  const locks = services.create({ ttl: 2_000 });
  const lock = await locks.acquire('stepped-back');
  const before = lock.validUntil;

  skew -= 60_000;

  expect(lock.validUntil).toBe(before);
  expect(lock.isHeld).toBe(true);
  expect(await lock.release()).toBe(true);
});

it('counts a suspension toward maxHold: after one longer than maxHold the lock is lost and released', async () => {
  const locks = services.create({ ttl: 10_000 });
  const lost: LockLostError[] = [];
  locks.on('lost', (error) => void lost.push(error));
  const lock = await locks.acquire('held-through-suspension', { maxHold: 2_000 });

  skew += 5_000; // the host slept 5 s: 5 s of the 10 s lease are left, maxHold has passed

  expect(lock.isHeld).toBe(false);
  expect((lock.signal.reason as LockLostError).reason).toBe('max-hold');
  expect(lost.map((error) => error.reason)).toEqual(['max-hold']);
  await waitFor(async () => (await redis.exists(keyOf('held-through-suspension'))) === 0, 1_000);
});

it('renews at once after a jump seen outside the watchdog (a read of isHeld) that left little lease', async () => {
  const locks = services.create({ ttl: 6_000 });
  const lost: LockLostError[] = [];
  locks.on('lost', (error) => void lost.push(error));
  const lock = await locks.acquire('seen-by-a-read');

  skew += 4_800; // suspended 4.8 s: about 1.1 s of the lease left; the renewal is overdue
  expect(lock.isHeld).toBe(true); // the jump is seen here, not in the watchdog's tick

  await sleep(1_500); // past that deadline: held only if a renewal went out right after the jump
  expect(lost).toEqual([]);
  expect(lock.isHeld).toBe(true);
  expect(await redis.get(keyOf('seen-by-a-read'))).toBe(lock.token);
  expect(await lock.release()).toBe(true);
});
