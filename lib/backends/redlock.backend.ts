import { RedisUnavailableError } from '../errors/redis-unavailable.error';
import type { LockRedisKeys } from '../keys/lock-keys';
import { combineReleasePubSubs } from '../redis/release-pubsub';
import { withTimeout } from '../engine/with-timeout';
import type { LockBackend, ReleasePubSub, RenewableLease } from './lock-backend';
import type { RedisBackend } from './redis.backend';

/**
 * Redlock over N independent primaries: a grant needs a quorum (N/2+1) of nodes AND time left,
 * `ttl − elapsed − drift > 0`; a failed attempt is released on every node. Extension and release
 * count as ours only with a quorum too. Each node answers within `nodeTimeout` or counts as "no".
 *
 * The fence is the highest per-node counter among the granting quorum: it increases with every
 * grant whenever the previous grant's highest counter sits on a node of the new quorum, which
 * is not guaranteed in every failure pattern — treat it as best effort in this mode.
 */
export class RedlockBackend implements LockBackend {
  private readonly quorum: number;

  constructor(
    private readonly nodes: RedisBackend[],
    private readonly nodeTimeout: number,
    private readonly driftFactor: number,
  ) {
    this.quorum = Math.floor(nodes.length / 2) + 1;
  }

  async acquire(keys: LockRedisKeys, token: string, ttl: number): Promise<number> {
    const started = performance.now();
    const replies = await this.onEveryNode((node) => node.acquire(keys, token, ttl));
    const fences = replies.filter((reply): reply is number => reply !== undefined && reply > 0);
    const validity = ttl - (performance.now() - started) - this.drift(ttl);
    if (fences.length >= this.quorum && validity > 0) return Math.max(...fences);

    // No quorum (or no time left): undo the partial grant everywhere, answered or not.
    await this.onEveryNode((node) => node.release(keys, token));
    const answered = replies.filter((reply) => reply !== undefined).length;
    if (answered < this.quorum) throw this.unreachable(answered, 'acquire');
    const busy = replies.filter((reply): reply is number => reply !== undefined && reply <= 0);
    // Retry after the shortest lease among the nodes that refused (0 if none said).
    return busy.length > 0 ? Math.max(...busy) : 0;
  }

  async extend(keys: LockRedisKeys, token: string, ms: number): Promise<boolean> {
    return this.verdict(await this.onEveryNode((node) => node.extend(keys, token, ms)), 'extend');
  }

  async renewMany(leases: readonly RenewableLease[]): Promise<(boolean | undefined)[]> {
    const replies = await this.onEveryNode((node) => node.renewMany(leases));
    const answered = replies.filter((reply) => reply !== undefined).length;
    if (answered < this.quorum) throw this.unreachable(answered, 'renewal');
    return leases.map((_, i) => this.decide(replies.map((reply) => reply?.[i])));
  }

  async release(keys: LockRedisKeys, token: string): Promise<boolean> {
    return this.verdict(await this.onEveryNode((node) => node.release(keys, token)), 'release');
  }

  async forceRelease(keys: LockRedisKeys): Promise<boolean> {
    return (await this.onEveryNode((node) => node.forceRelease(keys))).some(Boolean);
  }

  async isLocked(keys: LockRedisKeys): Promise<boolean> {
    return this.hasQuorum(await this.onEveryNode((node) => node.isLocked(keys)));
  }

  createPubSub(): ReleasePubSub {
    return combineReleasePubSubs(this.nodes.map((node) => node.createPubSub()));
  }

  async close(): Promise<void> {
    await Promise.all(this.nodes.map((node) => node.close()));
  }

  drift(ttl: number): number {
    return ttl * this.driftFactor + 2;
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

  private unreachable(answered: number, operation: string): RedisUnavailableError {
    return new RedisUnavailableError(
      `Redlock ${operation}: only ${answered} of ${this.nodes.length} nodes answered, fewer than ` +
        `the ${this.quorum} a decision needs. Check that a majority of the nodes is reachable.`,
    );
  }

  /** Runs `operation` on all nodes in parallel; a node that fails or is slow answers `undefined`. */
  private onEveryNode<T>(
    operation: (node: RedisBackend) => Promise<T>,
  ): Promise<(T | undefined)[]> {
    return Promise.all(
      this.nodes.map((node) =>
        withTimeout(operation(node), this.nodeTimeout, 'a Redlock node').catch(() => undefined),
      ),
    );
  }
}
