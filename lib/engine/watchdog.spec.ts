import type { Logger } from '@nestjs/common';
import { MemoryLockBackend } from '../backends/memory.backend';
import type { LockLostError } from '../errors/errors';
import { useClockSource } from '../util/clock';
import { HeldLock } from './held-lock';
import type { LockOperations } from './lock-operations';
import { Watchdog, type RenewFn } from './watchdog';
import { holdOnMemory, memoryOperations } from '../../test/support/memory-operations';

const silent = { warn: () => undefined } as unknown as Logger;

describe('Watchdog (in-memory backend, fake timers)', () => {
  let backend: MemoryLockBackend;
  let watchdog: Watchdog;
  let operations: LockOperations<HeldLock>;
  let lost: LockLostError[];
  /** The keys of each renewal batch sent, in order. */
  let batches: string[][];
  /** What the renewals answer: the backend's verdict unless a test replaces it. */
  let renew: RenewFn;

  beforeEach(() => {
    jest.useFakeTimers();
    useClockSource({ monotonic: () => Date.now(), wall: () => Date.now() });
    backend = new MemoryLockBackend({ now: () => Date.now() });
    lost = [];
    batches = [];
    renew = (locks) => backend.renewMany(locks);
    watchdog = new Watchdog((locks) => {
      batches.push(locks.map((lock) => lock.key));
      return renew(locks);
    }, silent);
    operations = memoryOperations(backend, watchdog, lost);
  });

  afterEach(() => {
    watchdog.stop();
    jest.useRealTimers();
    useClockSource();
  });

  /** Acquires `key` on the backend now and hands the lock to the watchdog. */
  const hold = (key: string, lease = 600): Promise<HeldLock> =>
    holdOnMemory(backend, operations, watchdog, { key, lease });

  it('renews a third into the lease, to the full lease again', async () => {
    const lock = await hold('a', 600);
    await jest.advanceTimersByTimeAsync(199);
    expect(batches).toEqual([]);
    expect(backend.pttl(lock.redisKeys)).toBe(401);
    await jest.advanceTimersByTimeAsync(1);
    expect(batches).toEqual([['a']]);
    expect(backend.pttl(lock.redisKeys)).toBe(600);
    expect(lock.validUntil).toBe(Date.now() + 600);
  });

  it('keeps a lock alive for many leases, about three renewals per lease', async () => {
    const lock = await hold('a', 600);
    await jest.advanceTimersByTimeAsync(6_000);
    expect(lock.isHeld).toBe(true);
    expect(backend.holder(lock.redisKeys)).toBe('token-a');
    expect(batches).toHaveLength(30);
    expect(lost).toEqual([]);
  });

  it('batches the locks due within a sixth of the lease, and they stay due together', async () => {
    await hold('a', 600); // due at 200
    await jest.advanceTimersByTimeAsync(50);
    await hold('b', 600); // due at 250: within the 100 ms window at 200
    await jest.advanceTimersByTimeAsync(100);
    await hold('c', 600); // due at 350: not yet
    await jest.advanceTimersByTimeAsync(50);
    expect(batches).toEqual([['a', 'b']]);
    await jest.advanceTimersByTimeAsync(200); // 400: a and b again, c (due at 350) with them
    expect(batches).toEqual([
      ['a', 'b'],
      ['a', 'b', 'c'],
    ]);
    await jest.advanceTimersByTimeAsync(200);
    expect(batches).toEqual([
      ['a', 'b'],
      ['a', 'b', 'c'],
      ['a', 'b', 'c'],
    ]);
  });

  it('reports the lock lost (not-owner) when a renewal is refused, and stops renewing it', async () => {
    const lock = await hold('a', 600);
    const kept = await hold('b', 600);
    await backend.forceRelease(lock.redisKeys); // an administrator took it away
    await jest.advanceTimersByTimeAsync(200);
    expect(lost.map((error) => [error.key, error.reason])).toEqual([['a', 'not-owner']]);
    expect(lock.signal.aborted).toBe(true);
    expect(watchdog.size).toBe(1);
    await jest.advanceTimersByTimeAsync(2_000);
    expect(batches.slice(1).every((batch) => batch.join() === 'b')).toBe(true);
    expect(kept.isHeld).toBe(true);
  });

  it('declares the lock lost at its deadline when no renewal is confirmed, retrying meanwhile', async () => {
    renew = () => Promise.reject(new Error('connection lost'));
    const lock = await hold('a', 3_000);
    await jest.advanceTimersByTimeAsync(2_999);
    expect(lost).toEqual([]);
    // First at 1 000 ms, then every lease / 10 = 300 ms until the deadline.
    expect(batches.length).toBe(7);
    await jest.advanceTimersByTimeAsync(1);
    expect(lost.map((error) => error.reason)).toEqual(['deadline']);
    expect(lock.isHeld).toBe(false);
    expect(watchdog.size).toBe(0);
  });

  it('retries soon after an answer it cannot tell (undefined), and keeps the lock', async () => {
    let unsure = 2;
    renew = (locks) =>
      unsure-- > 0 ? Promise.resolve(locks.map(() => undefined)) : backend.renewMany(locks);
    const lock = await hold('a', 600);
    await jest.advanceTimersByTimeAsync(200 + 60 + 60);
    expect(batches).toHaveLength(3);
    expect(lock.validUntil).toBe(Date.now() + 600);
    expect(lost).toEqual([]);
  });

  it('ignores a late answer for a lock released while its renewal was in flight', async () => {
    let answer!: (value: boolean[]) => void;
    renew = () => new Promise((resolve) => (answer = resolve));
    const lock = await hold('a', 600);
    await jest.advanceTimersByTimeAsync(200);
    expect(await lock.release()).toBe(true);
    answer([false]);
    await jest.advanceTimersByTimeAsync(0);
    expect(lost).toEqual([]);
  });

  it('renews no lock that a loss earlier in the same tick released', async () => {
    const first = await hold('a', 600);
    first.renews = false; // lost at its deadline, at 600
    const second = await hold('b', 600); // renewed at 200, 400, and due at 600 too
    first.signal.addEventListener('abort', () => void second.release());
    await jest.advanceTimersByTimeAsync(600);
    expect(lost.map((error) => error.reason)).toEqual(['deadline']);
    expect(second.isHeld).toBe(false);
    expect(batches).toEqual([['b'], ['b']]); // nothing for b at 600: it was released first
  });

  it('only watches the deadline of a lock that does not renew', async () => {
    const lock = await hold('a', 600);
    lock.renews = false;
    await jest.advanceTimersByTimeAsync(600);
    expect(batches).toEqual([]);
    expect(lost.map((error) => error.reason)).toEqual(['deadline']);
  });

  it('renews nothing after remove() or stop()', async () => {
    const removed = await hold('a', 600);
    await hold('b', 600);
    watchdog.remove(removed);
    await jest.advanceTimersByTimeAsync(200);
    expect(batches).toEqual([['b']]);
    watchdog.stop();
    await jest.advanceTimersByTimeAsync(2_000);
    expect(batches).toEqual([['b']]);
  });
});
