import { Logger } from '@nestjs/common';
import { messages, type RedlockTally } from '../errors/messages';
import { RedisUnavailableError } from '../errors/errors';
import type { LockRedisKeys } from '../keys/lock-keys';
import { combineReleasePubSubs, type ReleasePubSub } from '../redis/release-pubsub';
import { redlockDrift } from '../util/clock';
import { withTimeout } from '../util/with-timeout';
import type { LockBackend, RenewableLease } from './lock-backend';
import type { RawLockInfo } from './lock-info';
import type { EvictedLock } from './lock-eviction';
import type { LockNamesPage } from './lock-scan';
import { mergeEvictions, quorumLockInfo } from './redlock-inspect';
import { REDLOCK } from './store-capabilities';
import type { NodeGrant, NodeRenewal, QuorumNode } from './redlock-node';

/**
 * Redlock over N independent primaries: a grant needs a quorum (N/2+1) of nodes that may vote AND
 * time left, `ttl − elapsed − drift > 0`; a failed attempt is released on every node. Extension
 * and release count as ours only with a quorum too. Each node answers within `nodeTimeout` or
 * counts as "no". A node that restarted within `restartGrace` grants but does not vote.
 *
 * Repair: each renewal re-creates the key on reachable nodes that lost it, and keeps it there only
 * when a quorum still had the key — so a lock held across a restart is back on every node.
 *
 * Fences: the grant's fence is the highest counter among its nodes, written back to the others
 * before the grant counts, so a quorum of nodes holds a counter ≥ that fence while our key is
 * there. Any later grant has a node in common with them, made after our key left it: its fence is
 * higher — unless that node also lost its counter (a restart), which then restarts from the clock.
 */
export class RedlockBackend implements LockBackend {
  /** Exclusive locks only: the engine and the service refuse the rest before a node is asked. */
  readonly capabilities = REDLOCK;
  private readonly quorum: number;
  private readonly logger = new Logger('RedisLock');

  constructor(
    private readonly nodes: readonly QuorumNode[],
    private readonly nodeTimeout: number,
    private readonly driftFactor: number,
    /** The default lease, checked at startup against `nodeTimeout` and the drift. */
    ttl: number,
  ) {
    this.quorum = Math.floor(nodes.length / 2) + 1;
    // A renewal is sent every ttl / 3; a slow node may take a whole nodeTimeout to answer it.
    if (nodeTimeout + this.drift(ttl) > ttl / 3) {
      this.logger.warn(messages.redlockTtlTooShort(ttl, nodeTimeout, this.drift(ttl)));
    }
  }

  async acquire(keys: LockRedisKeys, token: string, ttl: number): Promise<number> {
    const started = performance.now();
    const replies = await this.onEveryNode((node) => node.acquire(keys, token, ttl));
    const granted = replies.filter((grant): grant is NodeGrant => (grant?.reply ?? 0) > 0);
    const votes = granted.filter((grant) => grant.votes).length;
    let late = 0;
    let unfenced = false;
    if (votes >= this.quorum) {
      const fence = Math.max(...granted.map((grant) => grant.reply));
      const raised = await this.raiseFences(keys, token, fence, replies);
      const elapsed = performance.now() - started;
      if (raised >= this.quorum && ttl - elapsed - this.drift(ttl) > 0) return fence;
      unfenced = raised < this.quorum;
      late = unfenced ? 0 : Math.ceil(elapsed);
    }

    // No quorum (or no time left): undo the partial grant everywhere, answered or not.
    await this.onEveryNode((node) => node.backend.release(keys, token));
    const busy = replies.map((grant) => grant?.reply ?? 1).filter((reply) => reply <= 0);
    // "Busy" only when the holders alone make a quorum impossible; a quorum missed for lack of
    // answers, of votes or of time says nothing about a holder: the nodes are unavailable.
    if (busy.length > this.nodes.length - this.quorum) return Math.max(...busy);
    const tally: RedlockTally = {
      votes,
      restarted: granted.length - votes,
      refused: busy.length,
      unanswered: replies.filter((grant) => grant === undefined).length,
      late,
      unfenced,
    };
    throw new RedisUnavailableError(
      messages.redlockNoQuorum(keys.lock, this.nodes.length, this.quorum, tally),
    );
  }

  async extend(keys: LockRedisKeys, token: string, ms: number): Promise<boolean> {
    const replies = await this.onEveryNode((node) => node.backend.extend(keys, token, ms));
    return this.verdict(replies, 'extend');
  }

  async renewMany(leases: readonly RenewableLease[]): Promise<(boolean | undefined)[]> {
    const replies = await this.onEveryNode((node) => node.renew(leases));
    const answered = replies.filter((reply) => reply !== undefined).length;
    if (answered < this.quorum) {
      await this.undoRepairs(leases, replies, () => true);
      throw this.unreachable(answered, 'renewal');
    }
    // Only a key that was still there votes: one re-created just now proves nothing about the past.
    const decisions = leases.map((_, i) =>
      this.decide(replies.map((reply) => (reply === undefined ? undefined : reply[i] === 1))),
    );
    await this.undoRepairs(leases, replies, (i) => decisions[i] !== true);
    return decisions;
  }

  async release(keys: LockRedisKeys, token: string): Promise<boolean> {
    const replies = await this.onEveryNode((node) => node.backend.release(keys, token));
    return this.verdict(replies, 'release');
  }

  async forceRelease(keys: LockRedisKeys): Promise<boolean> {
    return (await this.onEveryNode((node) => node.backend.forceRelease(keys))).some(Boolean);
  }

  async evict(keys: LockRedisKeys): Promise<EvictedLock | null> {
    return mergeEvictions(await this.onEveryNode((node) => node.backend.evict(keys)));
  }

  /** Every node is read; the lock counts as held only where a quorum agrees (`quorumLockInfo`). */
  async inspectRaw(keys: LockRedisKeys): Promise<RawLockInfo> {
    const replies = await this.onEveryNode((node) => node.backend.inspectRaw(keys));
    return quorumLockInfo(replies, this.quorum);
  }

  /**
   * Lists from one node: the first that answers, then the same one for every later page (its
   * index leads the cursor). Each name found is inspected with a quorum, so a minority's stale
   * key is not listed as held; a lock the scanned node lost (a restart) is back on it after the
   * holder's next renewal.
   */
  async scan(prefix: string, cursor: string | undefined, count: number): Promise<LockNamesPage> {
    const [, at, inner] = /^(\d+)\|(.*)$/.exec(cursor ?? '') ?? [];
    const order = at === undefined ? this.nodes.map((_, i) => i) : [Number(at)];
    let lastError: unknown;
    for (const index of order) {
      const node = this.nodes[index];
      if (!node) break;
      try {
        const page = await withTimeout(
          node.backend.scan(prefix, inner, count),
          this.nodeTimeout,
          'a Redlock node',
        );
        return page.cursor === undefined ? page : { ...page, cursor: `${index}|${page.cursor}` };
      } catch (error) {
        lastError = error;
      }
    }
    throw new RedisUnavailableError(`Redlock list: no node answered SCAN (${String(lastError)})`);
  }

  async isLocked(keys: LockRedisKeys): Promise<boolean> {
    return this.hasQuorum(await this.onEveryNode((node) => node.backend.isLocked(keys)));
  }

  createPubSub(): ReleasePubSub {
    return combineReleasePubSubs(this.nodes.map((node) => node.backend.createPubSub()));
  }

  async close(): Promise<void> {
    await Promise.all(this.nodes.map((node) => node.backend.close()));
    this.nodes.forEach((node) => node.detach());
  }

  drift(ttl: number): number {
    return redlockDrift(ttl, this.driftFactor);
  }

  private hasQuorum(replies: (boolean | undefined)[]): boolean {
    return replies.filter((reply) => reply === true).length >= this.quorum;
  }

  /**
   * Ours with a quorum of yeses; not ours once the noes make a quorum impossible; otherwise
   * undefined: too few nodes answered to tell.
   */
  private decide(replies: (boolean | undefined)[]): boolean | undefined {
    if (this.hasQuorum(replies)) return true;
    const noes = replies.filter((reply) => reply === false).length;
    return noes > this.nodes.length - this.quorum ? false : undefined;
  }

  /** {@link decide}, where "cannot tell" is an outage, not another owner. */
  private verdict(replies: (boolean | undefined)[], operation: string): boolean {
    const decided = this.decide(replies);
    if (decided !== undefined) return decided;
    throw this.unreachable(replies.filter((reply) => reply !== undefined).length, operation);
  }

  /**
   * Writes `fence` back to the granting nodes whose counter is lower. Resolves how many nodes now
   * hold a counter ≥ `fence` under our key: the grant counts only if they make a quorum.
   */
  private async raiseFences(
    keys: LockRedisKeys,
    token: string,
    fence: number,
    replies: (NodeGrant | undefined)[],
  ): Promise<number> {
    const raised = await this.onEveryNode((node, i) => {
      const reply = replies[i]?.reply ?? 0;
      if (reply <= 0) return Promise.resolve(false);
      return reply >= fence ? Promise.resolve(true) : node.raiseFence(keys, token, fence);
    });
    return raised.filter((ok) => ok === true).length;
  }

  /** Deletes the keys a renewal re-created, for the leases `undo` names (compare-and-delete). */
  private async undoRepairs(
    leases: readonly RenewableLease[],
    replies: (NodeRenewal[] | undefined)[],
    undo: (lease: number) => boolean,
  ): Promise<void> {
    await this.onEveryNode((node, n) =>
      Promise.all(
        leases
          .filter((_, i) => replies[n]?.[i] === 2 && undo(i))
          .map((lease) => node.backend.release(lease.redisKeys, lease.token)),
      ),
    );
  }

  private unreachable(answered: number, operation: string): RedisUnavailableError {
    return new RedisUnavailableError(
      `Redlock ${operation}: only ${answered} of ${this.nodes.length} nodes answered, fewer than ` +
        `the ${this.quorum} a decision needs. Check that a majority of the nodes is reachable.`,
    );
  }

  /** Runs `operation` on all nodes in parallel; a node that fails or is slow answers `undefined`. */
  private onEveryNode<T>(
    operation: (node: QuorumNode, index: number) => Promise<T>,
  ): Promise<(T | undefined)[]> {
    return Promise.all(
      this.nodes.map((node, i) =>
        withTimeout(operation(node, i), this.nodeTimeout, 'a Redlock node').catch(() => undefined),
      ),
    );
  }
}
