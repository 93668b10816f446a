import { RedisUnavailableError } from '../errors/errors';
import type { RawLockInfo } from './lock-info';
import type { EvictedLock } from './lock-eviction';

/**
 * Redlock's view of one lock from its nodes' replies (undefined: no answer in time). Held only when
 * a quorum of nodes hold the same token — a minority's stale key is no lock; then the lowest PTTL
 * among them (the lease a quorum still guarantees), the highest fence counter among them, and the
 * holder record of the first of them that has one (a node repaired by renewal has none).
 */
export function quorumLockInfo(
  replies: readonly (RawLockInfo | undefined)[],
  quorum: number,
): RawLockInfo {
  const answered = replies.filter((reply): reply is RawLockInfo => reply !== undefined);
  if (answered.length < quorum) {
    throw new RedisUnavailableError(
      `Redlock inspect: only ${answered.length} of ${replies.length} nodes answered, fewer than ` +
        `the ${quorum} a reading needs. Check that a majority of the nodes is reachable.`,
    );
  }
  const votes = new Map<string, RawLockInfo[]>();
  for (const reply of answered) {
    if (reply.token !== null) votes.set(reply.token, [...(votes.get(reply.token) ?? []), reply]);
  }
  const holders = [...votes.values()].find((nodes) => nodes.length >= quorum);
  if (!holders) return { token: null, pttl: -2, fence: 0, holder: null, waiters: [] };
  return {
    token: holders[0]!.token,
    pttl: Math.min(...holders.map((node) => node.pttl)),
    fence: Math.max(...holders.map((node) => node.fence)),
    holder: holders.find((node) => node.holder !== null)?.holder ?? null,
    waiters: [],
  };
}

/** What a forced release removed across the nodes: the highest fence, the first holder record. */
export function mergeEvictions(
  replies: readonly (EvictedLock | null | undefined)[],
): EvictedLock | null {
  const removed = replies.filter((reply): reply is EvictedLock => reply != null);
  if (removed.length === 0) return null;
  const fence = Math.max(...removed.map((reply) => reply.fence));
  const holder = removed.find((reply) => reply.holder)?.holder;
  // Redlock serves exclusive locks only.
  const exclusive = { fence, count: 1, holders: holder ? [holder] : [] };
  const merged: EvictedLock = { kind: 'exclusive', fence, count: 1, removed: { exclusive } };
  return holder ? { ...merged, holder } : merged;
}
