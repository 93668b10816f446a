import type { AcquireTry, RenewableLease } from '../../backends/lock-backend';
import type { LockRedisKeys } from '../../keys/lock-keys';
import type { RedisCommander } from '../../redis/redis-client';
import type { FairLeases, KindLeases, RedisKindContext } from '../kind-leases';
import { inspectLeaderScript } from './inspect-leader.script';
import type { LeaderReads, RawLeaderInfo } from './leader-info';

/**
 * A role's leadership on one Redis or a Cluster. A term is an exclusive lease under the role's
 * own names (`<prefix>{<role>}:leader`, see `LEADER_SUFFIX`), its fence the term: every command
 * goes to the exclusive kind's adapter, whatever layout its scripts keep, so the two never drift
 * apart. Only the read of who leads is the leader's own.
 */
export class RedisLeaderLeases implements KindLeases, LeaderReads {
  /** Fair mode (`fair: true`): followers queue as a mutex's waiters do, and a release hands over. */
  readonly fair?: FairLeases;

  constructor(
    private readonly exclusive: KindLeases,
    private readonly context: RedisKindContext,
  ) {
    this.fair = exclusive.fair;
  }

  acquire(
    keys: LockRedisKeys,
    token: string,
    ttl: number,
    how?: AcquireTry,
    via?: RedisCommander,
  ): Promise<number> {
    return this.exclusive.acquire(keys, token, ttl, how, via);
  }

  extend(keys: LockRedisKeys, token: string, ms: number): Promise<boolean> {
    return this.exclusive.extend(keys, token, ms);
  }

  release<T>(keys: LockRedisKeys, token: string, then: (deleted: boolean) => T): Promise<T> {
    return this.exclusive.release(keys, token, then);
  }

  renew(leases: readonly RenewableLease[]): Promise<(boolean | undefined)[]> {
    return this.exclusive.renew(leases);
  }

  inspect(keys: LockRedisKeys): Promise<RawLeaderInfo> {
    const { client, publish } = this.context;
    return inspectLeaderScript.run(client, [keys.lock, keys.fence], [publish()], (reply) => {
      const [token, pttl, term, followers] = reply;
      return {
        token: token || null,
        leaseLeftMs: token ? Math.max(0, pttl) : 0,
        term: term ? Number(term) : 0,
        followers,
      };
    });
  }
}
