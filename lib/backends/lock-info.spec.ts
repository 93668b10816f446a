import { lockInfoOf, type RawLockInfo } from './lock-info';
import { evictedOf } from './lock-eviction';

const free: RawLockInfo = { token: null, pttl: -2, fence: 7, holder: null, waiters: [] };

describe('lockInfoOf', () => {
  it('reads a free key as not held, and keeps the fair waiters a queue still holds', () => {
    expect(lockInfoOf(free)).toEqual({ held: false });
    expect(lockInfoOf({ ...free, waiters: ['5000', 'w-1', '6000', null] })).toEqual({
      held: false,
      waiters: [{ since: 5, instanceId: 'w-1' }, { since: 6 }],
    });
  });

  it('counts every live reader, lists those with a record, and reads the longest lease', () => {
    const raw = { ...free, readers: [100, '1 a', 300, null, 200, '2 b'], writersWaiting: 1 };
    expect(lockInfoOf(raw)).toEqual({
      held: true,
      kind: 'read',
      ttlMs: 300,
      fence: 7,
      readers: {
        count: 3,
        holders: [
          { since: 1, instanceId: 'a', ttlMs: 100 },
          { since: 2, instanceId: 'b', ttlMs: 200 },
        ],
        writersWaiting: 1,
      },
    });
  });

  it('reads a key that holds a mutex and a semaphore as the mutex, and each apart when asked', () => {
    const raw: RawLockInfo = {
      ...free,
      token: 't',
      pttl: 900,
      holder: '3 m',
      semaphore: { limit: 2, fence: 11, permits: [400, '4 s'], waiters: ['9000', 'q'] },
    };
    expect(lockInfoOf(raw)).toMatchObject({ kind: 'exclusive', holder: { instanceId: 'm' } });
    // Unasked, the other kind comes beside the first (as the CLI's show prints it).
    expect(lockInfoOf(raw).others).toEqual([lockInfoOf(raw, 'semaphore')]);
    expect(lockInfoOf(raw, 'exclusive').others).toBeUndefined();
    expect(lockInfoOf(raw, 'semaphore')).toEqual({
      held: true,
      kind: 'semaphore',
      ttlMs: 400,
      fence: 11,
      semaphore: {
        permits: 2,
        count: 1,
        fence: 11,
        holders: [{ since: 4, instanceId: 's', ttlMs: 400 }],
      },
      waiters: [{ since: 9, instanceId: 'q' }],
    });
    expect(lockInfoOf(raw, 'read')).toEqual({ held: false });
  });
});

describe('evictedOf', () => {
  const nothing = {
    deleted: false,
    fence: 7,
    holder: null,
    readers: [],
    permits: [],
    permitFence: 9,
  };

  it('reports the first kind removed at the top, with its fence, count and holders, or null when nothing was', () => {
    expect(evictedOf(nothing)).toBeNull();
    expect(evictedOf({ ...nothing, deleted: true })).toEqual({
      kind: 'exclusive',
      fence: 7,
      count: 1,
      removed: { exclusive: { fence: 7, count: 1, holders: [] } },
    });
    expect(evictedOf({ ...nothing, readers: [5, '1 r', 6, null] })).toEqual({
      kind: 'read',
      fence: 7,
      count: 2,
      holders: [{ since: 1, instanceId: 'r', ttlMs: 5 }],
      removed: { read: { fence: 7, count: 2, holders: [{ since: 1, instanceId: 'r', ttlMs: 5 }] } },
    });
  });

  it('reports every kind removed under removed: a mutex and three permits, one without a record', () => {
    const raw = {
      ...nothing,
      deleted: true,
      holder: '3 m',
      permits: [5, '2 p', 6, null, 7, '4 q'],
    };
    const permitHolders = [
      { since: 2, instanceId: 'p', ttlMs: 5 },
      { since: 4, instanceId: 'q', ttlMs: 7 },
    ];
    expect(evictedOf(raw)).toEqual({
      kind: 'exclusive',
      fence: 7,
      count: 1,
      holder: { since: 3, instanceId: 'm' },
      removed: {
        exclusive: { fence: 7, count: 1, holders: [{ since: 3, instanceId: 'm' }] },
        semaphore: { fence: 9, count: 3, holders: permitHolders },
      },
    });
    expect(evictedOf({ ...nothing, permits: [5, '2 p'] })).toEqual({
      kind: 'semaphore',
      fence: 9,
      count: 1,
      holders: [permitHolders[0]],
      removed: { semaphore: { fence: 9, count: 1, holders: [permitHolders[0]] } },
    });
  });
});
