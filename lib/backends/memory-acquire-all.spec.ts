import { READ } from '../keys/lease-kind';
import { lockRedisKeys } from '../keys/lock-keys';
import { MemoryLockBackend } from './memory.backend';

const [a, b, c] = ['a', 'b', 'c'].map((key) => lockRedisKeys('lock:', key)) as [
  ReturnType<typeof lockRedisKeys>,
  ReturnType<typeof lockRedisKeys>,
  ReturnType<typeof lockRedisKeys>,
];

describe('MemoryLockBackend.acquireAll (fake timers drive its clock)', () => {
  let backend: MemoryLockBackend;

  beforeEach(() => {
    jest.useFakeTimers();
    backend = new MemoryLockBackend({ fenceRetention: 1_000 });
  });

  afterEach(() => jest.useRealTimers());

  it('grants every free lock, each with its own token and fence', async () => {
    const reply = await backend.acquireAll([a, b], ['t1', 't2'], 1_000);
    expect(reply).toEqual({ fences: [expect.any(Number), expect.any(Number)] });
    expect([backend.holder(a), backend.holder(b)]).toEqual(['t1', 't2']);
  });

  it('writes nothing when one lock is busy, and names the first busy one with its PTTL', async () => {
    await backend.acquire(c, 'other', 1_000);
    jest.advanceTimersByTime(400);
    expect(await backend.acquireAll([a, c, b], ['t1', 't2', 't3'], 1_000)).toEqual({
      busy: 1,
      retryAfterMs: 600,
    });
    expect([backend.holder(a), backend.holder(b)]).toEqual([undefined, undefined]);
  });

  it('counts live readers of a lock as busy, until their last share ends', async () => {
    await backend.acquire(lockRedisKeys('lock:', 'b', READ), 'reader', 1_000);
    jest.advanceTimersByTime(300);
    expect(await backend.acquireAll([a, b], ['t1', 't2'], 1_000)).toEqual({
      busy: 1,
      retryAfterMs: 700,
    });
    expect(backend.holder(a)).toBeUndefined();
    jest.advanceTimersByTime(701);
    expect(await backend.acquireAll([a, b], ['t1', 't2'], 1_000)).toHaveProperty('fences');
  });

  it('answers a re-sent grant with the same fences', async () => {
    const first = await backend.acquireAll([a, b], ['t1', 't2'], 1_000);
    expect(await backend.acquireAll([a, b], ['t1', 't2'], 1_000)).toEqual(first);
  });

  it('grants again once the busy lease has run out, each fence moving on', async () => {
    const first = await backend.acquireAll([a, b], ['t1', 't2'], 100);
    jest.advanceTimersByTime(101);
    const second = await backend.acquireAll([b, a], ['u1', 'u2'], 100);
    if (!('fences' in first) || !('fences' in second)) throw new Error('not granted');
    expect(second.fences[0]).toBeGreaterThan(first.fences[1]!);
    expect(second.fences[1]).toBeGreaterThan(first.fences[0]!);
  });

  it('refuses a lease that is not a whole number of ms, as Redis does', async () => {
    await expect(backend.acquireAll([a, b], ['t1', 't2'], 1.5)).rejects.toThrow(/not an integer/);
    expect(backend.holder(a)).toBeUndefined();
  });
});
