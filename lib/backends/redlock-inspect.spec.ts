import type { RawLockInfo } from './lock-info';
import { mergeEvictions, quorumLockInfo } from './redlock-inspect';

const held = (token: string, pttl: number, fence: number, holder: string | null): RawLockInfo => ({
  token,
  pttl,
  fence,
  holder,
  waiters: [],
});
const free: RawLockInfo = { token: null, pttl: -2, fence: 7, holder: null, waiters: [] };

describe('quorumLockInfo', () => {
  it('is held by the token a quorum holds: lowest ttl, highest fence, first holder record', () => {
    const replies = [held('a', 900, 5, null), held('a', 800, 6, '1 x'), free];
    expect(quorumLockInfo(replies, 2)).toEqual({
      token: 'a',
      pttl: 800,
      fence: 6,
      holder: '1 x',
      waiters: [],
    });
  });

  it('is free when no token has a quorum, however many nodes hold some key', () => {
    const replies = [held('a', 900, 5, '1 x'), held('b', 900, 5, '1 y'), free];
    expect(quorumLockInfo(replies, 2).token).toBeNull();
  });

  it('refuses to answer with fewer replies than a quorum', () => {
    expect(() => quorumLockInfo([held('a', 900, 5, null), undefined, undefined], 2)).toThrow(
      /only 1 of 3 nodes answered/,
    );
  });
});

describe('mergeEvictions', () => {
  it('reports the highest fence and the first holder among the nodes that removed a lock', () => {
    const holder = { instanceId: 'x', since: 1 };
    const evicted = (fence: number, by?: typeof holder) =>
      by
        ? { kind: 'exclusive' as const, fence, count: 1, holder: by, removed: {} }
        : { kind: 'exclusive' as const, fence, count: 1, removed: {} };
    expect(mergeEvictions([evicted(3), null, evicted(4, holder), undefined])).toEqual({
      kind: 'exclusive',
      fence: 4,
      count: 1,
      holder,
      removed: { exclusive: { fence: 4, count: 1, holders: [holder] } },
    });
    expect(mergeEvictions([null, undefined, null])).toBeNull();
  });
});
