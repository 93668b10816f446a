import type { Logger } from '@nestjs/common';
import { MemoryLockBackend } from '../backends/memory.backend';
import { LockLostError } from '../errors/errors';
import { useClockSource } from '../util/clock';
import type { HeldLock } from './held-lock';
import type { LockOperations } from './lock-operations';
import { MultiLock } from './multi-lock';
import { Watchdog } from './watchdog';
import { holdOnMemory, memoryOperations } from '../../test/support/memory-operations';

const silent = { warn: () => undefined } as unknown as Logger;

describe('MultiLock: one key lost loses the set (in-memory backend, fake timers)', () => {
  let backend: MemoryLockBackend;
  let watchdog: Watchdog;
  let operations: LockOperations<HeldLock>;

  beforeEach(() => {
    jest.useFakeTimers();
    useClockSource({ monotonic: () => Date.now(), wall: () => Date.now() });
    backend = new MemoryLockBackend();
    watchdog = new Watchdog(() => Promise.resolve([]), silent);
    operations = memoryOperations(backend, watchdog);
  });

  afterEach(async () => {
    watchdog.stop();
    await backend.close();
    jest.useRealTimers();
    useClockSource();
  });

  const holdAll = async (...keys: string[]): Promise<HeldLock[]> =>
    Promise.all(keys.map((key) => holdOnMemory(backend, operations, watchdog, { key })));

  // The set's signal is created only when read: a loss must reach the set, and free the other
  // keys, whether anyone looked at the signal before it or not.
  it.each([
    ['read before the loss', true],
    ['never read until after it', false],
  ])('aborts with that key’s error and frees the others (signal %s)', async (_what, readFirst) => {
    const [a, b] = await holdAll('a', 'b');
    const set = new MultiLock([a!, b!]);
    const early = readFirst ? set.signal : undefined;
    if (early) expect(early.aborted).toBe(false);

    const error = b!.lose('not-owner');
    expect(set.isHeld).toBe(false);
    expect(set.lost).toBe(error);
    expect(set.signal.aborted).toBe(true);
    expect(set.signal.reason).toBe(error);
    if (early) expect(early).toBe(set.signal);
    await jest.advanceTimersByTimeAsync(0);
    expect(a!.isHeld).toBe(false);
    expect(await backend.isLocked(a!.redisKeys)).toBe(false);
    await expect(set.release()).resolves.toBe(false);
  });

  it('is lost from the start when a key was lost before the set was made', async () => {
    const [a, b] = await holdAll('c', 'd');
    const error = a!.lose('not-owner');
    const set = new MultiLock([a!, b!]);
    expect(set.lost).toBe(error);
    expect(set.signal.reason).toBe(error);
    await jest.advanceTimersByTimeAsync(0);
    expect(await backend.isLocked(b!.redisKeys)).toBe(false);
  });

  it('is lost when a key passed its deadline before the set was made', async () => {
    const [a, b] = await holdAll('e', 'f');
    jest.setSystemTime(Date.now() + 10_000); // past the 600 ms lease, no timer run meanwhile
    const set = new MultiLock([a!, b!]);
    expect(set.lost).toBeInstanceOf(LockLostError);
    expect(set.isHeld).toBe(false);
  });

  it('builds `fences` by key, and keeps the set held while no key is lost', async () => {
    const [a, b] = await holdAll('g', 'h');
    const set = new MultiLock([a!, b!]);
    expect(set.fences).toEqual({ g: a!.fence, h: b!.fence });
    expect(set.fences).toBe(set.fences);
    expect(Object.isFrozen(set.fences)).toBe(true);
    expect(set.isHeld).toBe(true);
    await expect(set.release()).resolves.toBe(true);
  });
});
