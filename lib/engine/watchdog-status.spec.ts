import type { Logger } from '@nestjs/common';
import { MemoryLockBackend } from '../backends/memory.backend';
import { RedisCommandError, RedisUnavailableError } from '../errors/errors';
import { useClockSource } from '../util/clock';
import { HeldLock } from './held-lock';
import type { LockOperations } from './lock-operations';
import { MAX_FAILURES_KEPT } from './renewal-record';
import { Watchdog, type RenewFn } from './watchdog';
import { holdOnMemory, memoryOperations } from '../../test/support/memory-operations';

const silent = { warn: () => undefined } as unknown as Logger;

describe('Watchdog.status() (fake timers)', () => {
  let backend: MemoryLockBackend;
  let watchdog: Watchdog;
  let operations: LockOperations<HeldLock>;
  let renew: RenewFn;
  /** Added to the monotonic clock: a tick that fires now sees itself this much late. */
  let stall: number;

  beforeEach(() => {
    jest.useFakeTimers();
    stall = 0;
    useClockSource({ monotonic: () => Date.now() + stall, wall: () => Date.now() + stall });
    backend = new MemoryLockBackend({ now: () => Date.now() });
    renew = (locks) => backend.renewMany(locks);
    watchdog = new Watchdog((locks) => renew(locks), silent);
    operations = memoryOperations(backend, watchdog);
  });

  afterEach(() => {
    watchdog.stop();
    jest.useRealTimers();
    useClockSource();
  });

  const hold = (key: string, lease = 600): Promise<HeldLock> =>
    holdOnMemory(backend, operations, watchdog, { key, lease, startedAt: Date.now() + stall });

  it('starts empty: running, no tick, no failure', () => {
    expect(watchdog.status()).toEqual({
      running: true,
      lastTickLate: 0,
      lastTickAt: undefined,
      overdue: 0,
      lastRenewedAt: undefined,
      failedAt: [],
      failedInRow: 0,
      lastFailure: undefined,
    });
  });

  it('records each tick and successful batch, on time', async () => {
    await hold('a', 600);
    await jest.advanceTimersByTimeAsync(200);
    const status = watchdog.status();
    expect(status).toMatchObject({ running: true, lastTickLate: 0, overdue: 0, failedInRow: 0 });
    expect(status.lastTickAt).toBe(Date.now());
    expect(status.lastRenewedAt).toBe(Date.now());
  });

  it('measures how late a tick ran after its time, and how overdue the next one is', async () => {
    await hold('a', 600); // first renewal due at 200
    await jest.advanceTimersByTimeAsync(150);
    stall = 120; // the clock moves on without the timer firing: an event loop blocked 120 ms
    expect(watchdog.status().overdue).toBe(70);
    await jest.advanceTimersByTimeAsync(50);
    expect(watchdog.status().lastTickLate).toBe(120);
    expect(watchdog.status().overdue).toBe(0);
  });

  it('counts failed batches, in a row and in all, with the last reason', async () => {
    const lock = await hold('a', 600);
    renew = () => Promise.reject(new RedisUnavailableError('Redis did not answer renewal'));
    await jest.advanceTimersByTimeAsync(200); // fails; retried every 60 ms (a tenth of the lease)
    await jest.advanceTimersByTimeAsync(60);
    let status = watchdog.status();
    expect(status.failedAt).toEqual([Date.now() - 60, Date.now()]);
    expect(status.failedInRow).toBe(2);
    expect(status.lastFailure).toBe('Redis did not answer renewal');
    renew = (locks) => backend.renewMany(locks);
    await jest.advanceTimersByTimeAsync(60);
    status = watchdog.status();
    expect(status.failedInRow).toBe(0);
    expect(status.failedAt).toHaveLength(2);
    expect(status.lastRenewedAt).toBe(Date.now());
    expect(lock.isHeld).toBe(true);
  });

  it('keeps no lock name from a refusal, whose message names the locks', async () => {
    await hold('secret-key', 600);
    renew = () => Promise.reject(new RedisCommandError('NOPERM on lock "secret-key"', 'NOPERM'));
    await jest.advanceTimersByTimeAsync(200);
    expect(watchdog.status().lastFailure).toBe('Redis refused the renewal (NOPERM)');
  });

  it('keeps only the last failures', async () => {
    await hold('a', 600_000);
    renew = () => Promise.reject(new Error('down'));
    // Due at 200 s, then retried every second (at most) until the deadline at 600 s.
    await jest.advanceTimersByTimeAsync(200_000 + (MAX_FAILURES_KEPT + 10) * 1_000);
    expect(watchdog.status().failedAt).toHaveLength(MAX_FAILURES_KEPT);
    expect(watchdog.status().failedInRow).toBe(MAX_FAILURES_KEPT + 11);
  });

  it('shows a timer that never fires as overdue, growing', async () => {
    await hold('a', 600);
    jest.clearAllTimers(); // the timer is gone, as if its callback were never called
    await jest.advanceTimersByTimeAsync(300);
    expect(watchdog.status()).toMatchObject({ running: true, overdue: 100, lastTickAt: undefined });
    await jest.advanceTimersByTimeAsync(400);
    expect(watchdog.status().overdue).toBe(500);
  });

  it('is not running with locks watched and no timer armed', async () => {
    await hold('a', 600);
    (watchdog as unknown as { timer?: NodeJS.Timeout }).timer = undefined;
    expect(watchdog.status().running).toBe(false);
  });
});
