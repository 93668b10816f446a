import { RedisUnavailableError } from '../errors/errors';
import { lockRedisKeys } from '../keys/lock-keys';
import type { RenewableLease } from './lock-backend';
import { MemoryLockBackend } from './memory.backend';
import type { RawLockInfo } from './lock-info';
import type { EvictedLock } from './lock-eviction';
import type { LockNamesPage } from './lock-scan';
import type { NodeGrant, NodeRenewal, QuorumNode } from './redlock-node';
import { RedlockBackend } from './redlock.backend';

/** A reply that never comes: the node counts as "no answer" after `nodeTimeout`. */
const silent = (): Promise<never> => new Promise(() => undefined);

/** Answers `value`, or never when it is undefined. */
const answer = <T>(value: T | undefined): Promise<T> =>
  value === undefined ? silent() : Promise.resolve(value);

interface FakeNode extends QuorumNode {
  acquire: jest.Mock<Promise<NodeGrant>>;
  renew: jest.Mock<Promise<NodeRenewal[]>>;
  raiseFence: jest.Mock<Promise<boolean>>;
  detach: jest.Mock<void>;
  backend: {
    extend: jest.Mock<Promise<boolean>>;
    release: jest.Mock<Promise<boolean>>;
    forceRelease: jest.Mock<Promise<boolean>>;
    isLocked: jest.Mock<Promise<boolean>>;
    evict: jest.Mock<Promise<EvictedLock | null>>;
    inspectRaw: jest.Mock<Promise<RawLockInfo>>;
    scan: jest.Mock<Promise<LockNamesPage>>;
    createPubSub: jest.Mock;
    close: jest.Mock<Promise<void>>;
  };
}

/** A node answering as told; `ours` is its answer to extend, release, forceRelease and isLocked. */
function fakeNode(grant?: NodeGrant, renewal?: NodeRenewal[], ours?: boolean): FakeNode {
  return {
    acquire: jest.fn(() => answer(grant)),
    renew: jest.fn(() => answer(renewal)),
    raiseFence: jest.fn(async () => true),
    detach: jest.fn(),
    backend: {
      extend: jest.fn(() => answer(ours)),
      release: jest.fn(() => (ours === undefined ? Promise.resolve(true) : answer(ours))),
      forceRelease: jest.fn(() => answer(ours)),
      isLocked: jest.fn(() => answer(ours)),
      evict: jest.fn(async () => null),
      inspectRaw: jest.fn(async () => ({
        token: null,
        pttl: -2,
        fence: 0,
        holder: null,
        waiters: [],
      })),
      scan: jest.fn(async () => ({ names: [] })),
      createPubSub: jest.fn(),
      close: jest.fn(async () => undefined),
    },
  };
}

const backendOf = (nodes: QuorumNode[], nodeTimeout = 20): RedlockBackend =>
  new RedlockBackend(nodes, nodeTimeout, 0.01, 30_000);

const keys = lockRedisKeys('lock:', 'k');
const lease: RenewableLease = { redisKeys: keys, token: 't', lease: 1_000, fence: 7 };
const yes = (reply: number): NodeGrant => ({ reply, votes: true });

describe('RedlockBackend.acquire', () => {
  it('grants with a quorum of votes, and writes the fence back where the counter is lower', async () => {
    const nodes = [fakeNode(yes(10)), fakeNode(yes(5)), fakeNode()];
    expect(await backendOf(nodes).acquire(keys, 't', 1_000)).toBe(10);
    expect(nodes[0]!.raiseFence).not.toHaveBeenCalled();
    expect(nodes[1]!.raiseFence).toHaveBeenCalledWith(keys, 't', 10);
    expect(nodes.every((node) => node.backend.release.mock.calls.length === 0)).toBe(true);
  });

  it('does not count a restarted node, and says "unavailable", not "busy", on a free key', async () => {
    const nodes = [fakeNode(yes(3)), fakeNode({ reply: 4, votes: false }), fakeNode()];
    await expect(backendOf(nodes).acquire(keys, 't', 1_000)).rejects.toThrow(
      /1 of 3 nodes granted .*1 restarted within restartGrace.*1 did not answer/,
    );
    expect(nodes.every((node) => node.backend.release.mock.calls.length === 1)).toBe(true);
  });

  it('is busy only when the holders alone make a quorum impossible', async () => {
    const busy = [fakeNode(yes(-500)), fakeNode(yes(-300))];
    expect(await backendOf([...busy, fakeNode()]).acquire(keys, 't', 1_000)).toBe(-300);
    const mixed = [fakeNode(yes(-500)), fakeNode(yes(2))];
    await expect(backendOf([...mixed, fakeNode()]).acquire(keys, 't', 1_000)).rejects.toThrow(
      RedisUnavailableError,
    );
  });

  it('rolls the grant back when too few nodes confirm the fence write-back', async () => {
    const nodes = [fakeNode(yes(9)), fakeNode(yes(5)), fakeNode()];
    nodes[1]!.raiseFence.mockResolvedValue(false);
    await expect(backendOf(nodes).acquire(keys, 't', 1_000)).rejects.toThrow(/confirmed its fence/);
    expect(nodes[0]!.backend.release).toHaveBeenCalled();
  });

  it.each([
    // [grants of 5 nodes (undefined: no answer), expected: fence, 'busy' or 'unavailable']
    [[1, 2, 3, undefined, undefined], 3],
    [[1, 2, undefined, undefined, undefined], 'unavailable'],
    [[1, 2, -10, -20, undefined], 'unavailable'],
    [[1, 2, -10, -20, -30], 'busy'],
    [[-10, -20, -30, undefined, undefined], 'busy'],
  ])('on 5 nodes (quorum 3), grants %p → %p', async (grants, expected) => {
    const nodes = grants.map((reply) => fakeNode(reply === undefined ? undefined : yes(reply)));
    const outcome = await backendOf(nodes)
      .acquire(keys, 't', 1_000)
      .then(
        (reply) => (reply > 0 ? reply : 'busy'),
        (error: unknown) => (error instanceof RedisUnavailableError ? 'unavailable' : error),
      );
    expect(outcome).toBe(expected);
  });
});

describe('RedlockBackend.acquire against the clock (fake timers)', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  /** A node that grants `reply` after `ms`. */
  function slowNode(reply: number, ms: number): FakeNode {
    const node = fakeNode();
    node.acquire.mockImplementation(
      () => new Promise((resolve) => setTimeout(() => resolve(yes(reply)), ms)),
    );
    return node;
  }

  it('rolls back a quorum that came too late to leave any of the ttl (ttl − elapsed − drift ≤ 0)', async () => {
    // ttl 100: drift 0.01 × 100 + 2 = 3 ms, so a quorum after 97 ms leaves nothing.
    const nodes = [slowNode(1, 97), slowNode(1, 97), slowNode(1, 97)];
    const acquired = backendOf(nodes, 200).acquire(keys, 't', 100);
    const failed = expect(acquired).rejects.toThrow(/the grant took 97 ms of its ttl/);
    await jest.advanceTimersByTimeAsync(97);
    await failed;
    expect(nodes.every((node) => node.backend.release.mock.calls.length === 1)).toBe(true);
  });

  it('keeps a quorum that left time to hold it', async () => {
    const nodes = [slowNode(1, 96), slowNode(1, 96), slowNode(1, 96)];
    const acquired = backendOf(nodes, 200).acquire(keys, 't', 100);
    await jest.advanceTimersByTimeAsync(96);
    expect(await acquired).toBe(1);
  });

  it('counts a node that answers after nodeTimeout as no answer', async () => {
    const nodes = [slowNode(1, 5), slowNode(1, 50), slowNode(1, 50)];
    const acquired = backendOf(nodes, 20).acquire(keys, 't', 1_000);
    const failed = expect(acquired).rejects.toThrow(/2 did not answer within nodeTimeout/);
    await jest.advanceTimersByTimeAsync(50);
    await failed;
  });
});

describe('RedlockBackend.extend, release, isLocked and forceRelease', () => {
  it.each([
    [[true, true, undefined], true],
    [[true, false, true], true],
    [[false, false, true], false],
    [[false, false, undefined], false],
    [[true, false, undefined], 'unavailable'],
    [[true, undefined, undefined], 'unavailable'],
  ])('decides extend and release from the nodes’ answers %p: %p', async (answers, expected) => {
    const nodes = answers.map((ours) => {
      const node = fakeNode(undefined, undefined, ours);
      node.backend.release.mockImplementation(() => answer(ours));
      return node;
    });
    const backend = backendOf(nodes);
    const verdict = (call: Promise<boolean>) =>
      call.catch((error: unknown) =>
        error instanceof RedisUnavailableError ? 'unavailable' : error,
      );
    expect(await verdict(backend.extend(keys, 't', 1_000))).toBe(expected);
    expect(await verdict(backend.release(keys, 't'))).toBe(expected);
  });

  it('says locked only with a quorum of nodes that hold it', async () => {
    const locked = [true, true, false].map((ours) => fakeNode(undefined, undefined, ours));
    expect(await backendOf(locked).isLocked(keys)).toBe(true);
    const unsure = [true, undefined, false].map((ours) => fakeNode(undefined, undefined, ours));
    expect(await backendOf(unsure).isLocked(keys)).toBe(false);
  });

  it('force-releases where it can, and says so when any node deleted it', async () => {
    const nodes = [false, true, undefined].map((ours) => fakeNode(undefined, undefined, ours));
    expect(await backendOf(nodes).forceRelease(keys)).toBe(true);
    expect(nodes.every((node) => node.backend.forceRelease.mock.calls.length === 1)).toBe(true);
    const none = [false, false, undefined].map((ours) => fakeNode(undefined, undefined, ours));
    expect(await backendOf(none).forceRelease(keys)).toBe(false);
  });

  it('closes every node and takes back what it added to their clients', async () => {
    const nodes = [fakeNode(), fakeNode(), fakeNode()];
    await backendOf(nodes).close();
    expect(nodes.every((node) => node.backend.close.mock.calls.length === 1)).toBe(true);
    expect(nodes.every((node) => node.detach.mock.calls.length === 1)).toBe(true);
  });

  it('keeps a drift margin of ttl × driftFactor + 2 ms', () => {
    expect(backendOf([fakeNode(), fakeNode(), fakeNode()]).drift(1_000)).toBe(12);
  });
});

describe('RedlockBackend.renewMany', () => {
  it('keeps a repair when a quorum still had the key', async () => {
    const nodes = [fakeNode(undefined, [1]), fakeNode(undefined, [2]), fakeNode(undefined, [1])];
    expect(await backendOf(nodes).renewMany([lease])).toEqual([true]);
    expect(nodes[1]!.backend.release).not.toHaveBeenCalled();
  });

  it('counts a re-created key as no vote, and deletes it again when the lock is not ours', async () => {
    const nodes = [fakeNode(undefined, [1]), fakeNode(undefined, [2]), fakeNode(undefined, [2])];
    expect(await backendOf(nodes).renewMany([lease])).toEqual([false]);
    expect(nodes[1]!.backend.release).toHaveBeenCalledWith(keys, 't');
    expect(nodes[2]!.backend.release).toHaveBeenCalledWith(keys, 't');
    expect(nodes[0]!.backend.release).not.toHaveBeenCalled();
  });

  it('undoes repairs when it cannot tell (a node did not answer)', async () => {
    const nodes = [fakeNode(undefined, [1]), fakeNode(undefined, [2]), fakeNode()];
    expect(await backendOf(nodes).renewMany([lease])).toEqual([undefined]);
    expect(nodes[1]!.backend.release).toHaveBeenCalledWith(keys, 't');
  });

  it('decides each lease of a batch on its own', async () => {
    const other = { ...lease, redisKeys: lockRedisKeys('lock:', 'other'), token: 'u' };
    const nodes = [
      fakeNode(undefined, [1, 0]),
      fakeNode(undefined, [1, 0]),
      fakeNode(undefined, [0, 1]),
    ];
    expect(await backendOf(nodes).renewMany([lease, other])).toEqual([true, false]);
  });

  it('fails the whole batch when fewer than a quorum answered, undoing every repair', async () => {
    const nodes = [fakeNode(undefined, [2, 1]), fakeNode(), fakeNode()];
    const other = { ...lease, token: 'u' };
    await expect(backendOf(nodes).renewMany([lease, other])).rejects.toThrow(
      /only 1 of 3 nodes answered/,
    );
    expect(nodes[0]!.backend.release.mock.calls).toEqual([[keys, 't']]);
  });
});

describe('RedlockBackend over in-memory nodes', () => {
  /** A quorum node on a MemoryLockBackend: grants vote, a renewal finds keys but never repairs. */
  function memoryNode(): QuorumNode & { backend: MemoryLockBackend } {
    const backend = new MemoryLockBackend();
    return {
      backend,
      acquire: async (k, token, ttl) => ({
        reply: await backend.acquire(k, token, ttl),
        votes: true,
      }),
      renew: async (leases) => (await backend.renewMany(leases)).map((ours) => (ours ? 1 : 0)),
      raiseFence: async (k, token) => backend.holder(k) === token,
      detach: () => undefined,
    };
  }

  it('grants over a node that another holder still blocks, and is busy once two do', async () => {
    const nodes = [memoryNode(), memoryNode(), memoryNode()];
    const redlock = backendOf(nodes);
    await nodes[0]!.backend.acquire(keys, 'stale', 1_000);
    expect(await redlock.acquire(keys, 'a', 1_000)).toBeGreaterThan(0);
    expect(nodes.map((node) => node.backend.holder(keys))).toEqual(['stale', 'a', 'a']);
    expect(await redlock.acquire(keys, 'b', 1_000)).toBeLessThan(0);
    expect(await redlock.release(keys, 'a')).toBe(true);
    expect(await redlock.isLocked(keys)).toBe(false);
  });

  it('hears a release message from any node over one combined subscriber', async () => {
    const nodes = [memoryNode(), memoryNode(), memoryNode()];
    const redlock = backendOf(nodes);
    const heard: string[] = [];
    const pubsub = redlock.createPubSub();
    pubsub.onMessage((_, message) => heard.push(message));
    await pubsub.subscribe(keys.channel);
    await nodes[2]!.backend.acquire(keys, 'a', 1_000);
    await nodes[2]!.backend.acquire(keys, 'b', 1_000); // refused there: a's release publishes
    await nodes[2]!.backend.release(keys, 'a');
    await new Promise((resolve) => setImmediate(resolve));
    expect(heard).toEqual(['a']);
  });
});
