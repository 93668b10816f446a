import { RedisUnavailableError } from '../errors/redis-unavailable.error';
import { lockRedisKeys } from '../keys/lock-keys';
import type { RenewableLease } from './lock-backend';
import type { NodeGrant, NodeRenewal, RedlockNode } from './redlock-node';
import { RedlockBackend } from './redlock.backend';

/** A reply that never comes: the node counts as "no answer" after `nodeTimeout`. */
const silent = (): Promise<never> => new Promise(() => undefined);

interface FakeNode {
  acquire: jest.Mock<Promise<NodeGrant>>;
  renew: jest.Mock<Promise<NodeRenewal[]>>;
  raiseFence: jest.Mock<Promise<boolean>>;
  backend: { release: jest.Mock<Promise<boolean>> };
}

function fakeNode(grant?: NodeGrant, renewal?: NodeRenewal[]): FakeNode {
  return {
    acquire: jest.fn(() => (grant ? Promise.resolve(grant) : silent())),
    renew: jest.fn(() => (renewal ? Promise.resolve(renewal) : silent())),
    raiseFence: jest.fn(async () => true),
    backend: { release: jest.fn(async () => true) },
  };
}

const backendOf = (nodes: FakeNode[]): RedlockBackend =>
  new RedlockBackend(nodes as unknown as RedlockNode[], 20, 0.01, 30_000);

const keys = lockRedisKeys('lock:', 'k');
const lease: RenewableLease = { redisKeys: keys, token: 't', lease: 1_000, fence: 7 };

describe('RedlockBackend.acquire', () => {
  it('grants with a quorum of votes, and writes the fence back where the counter is lower', async () => {
    const nodes = [fakeNode({ reply: 10, votes: true }), fakeNode({ reply: 5, votes: true })];
    nodes.push(fakeNode());
    expect(await backendOf(nodes).acquire(keys, 't', 1_000)).toBe(10);
    expect(nodes[0]!.raiseFence).not.toHaveBeenCalled();
    expect(nodes[1]!.raiseFence).toHaveBeenCalledWith(keys, 't', 10);
    expect(nodes.every((node) => node.backend.release.mock.calls.length === 0)).toBe(true);
  });

  it('does not count a restarted node, and says "unavailable", not "busy", on a free key', async () => {
    const nodes = [
      fakeNode({ reply: 3, votes: true }),
      fakeNode({ reply: 4, votes: false }),
      fakeNode(),
    ];
    await expect(backendOf(nodes).acquire(keys, 't', 1_000)).rejects.toThrow(
      /1 of 3 nodes granted .*1 restarted within restartGrace.*1 did not answer/,
    );
    expect(nodes.every((node) => node.backend.release.mock.calls.length === 1)).toBe(true);
  });

  it('is busy only when the holders alone make a quorum impossible', async () => {
    const busy = [fakeNode({ reply: -500, votes: true }), fakeNode({ reply: -300, votes: true })];
    expect(await backendOf([...busy, fakeNode()]).acquire(keys, 't', 1_000)).toBe(-300);
    const mixed = [fakeNode({ reply: -500, votes: true }), fakeNode({ reply: 2, votes: true })];
    await expect(backendOf([...mixed, fakeNode()]).acquire(keys, 't', 1_000)).rejects.toThrow(
      RedisUnavailableError,
    );
  });

  it('rolls the grant back when too few nodes confirm the fence write-back', async () => {
    const nodes = [fakeNode({ reply: 9, votes: true }), fakeNode({ reply: 5, votes: true })];
    nodes.push(fakeNode());
    nodes[1]!.raiseFence.mockResolvedValue(false);
    await expect(backendOf(nodes).acquire(keys, 't', 1_000)).rejects.toThrow(/confirmed its fence/);
    expect(nodes[0]!.backend.release).toHaveBeenCalled();
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
});
