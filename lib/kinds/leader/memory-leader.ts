import type { AcquireTry } from '../../backends/lock-backend';
import type { MemoryKeyspace } from '../../backends/memory-keyspace';
import type { MemoryPubSubHub } from '../../backends/memory-pubsub';
import type { LockRedisKeys } from '../../keys/lock-keys';
import type { MemoryKindTwin } from '../kind-leases';
import type { RawLeaderInfo } from './leader-info';

/**
 * A role's leadership in memory: the exclusive twin's leases under the role's own names, as the
 * Redis adapter runs the exclusive kind's scripts; and the read of who leads, from the keyspace
 * and the pub/sub hub, as `inspect-leader.script.ts` reads Redis.
 */
export class MemoryLeaderLeases implements MemoryKindTwin {
  constructor(
    private readonly exclusive: MemoryKindTwin,
    private readonly keys: MemoryKeyspace,
    private readonly hub: MemoryPubSubHub,
  ) {}

  acquire(keys: LockRedisKeys, token: string, ttl: number, how?: AcquireTry): number {
    return this.exclusive.acquire(keys, token, ttl, how);
  }

  extend(keys: LockRedisKeys, token: string, ms: number): boolean {
    return this.exclusive.extend(keys, token, ms);
  }

  release(keys: LockRedisKeys, token: string): boolean {
    return this.exclusive.release(keys, token);
  }

  inspect(keys: LockRedisKeys): RawLeaderInfo {
    const lease = this.keys.lease(keys);
    return {
      token: lease?.token ?? null,
      leaseLeftMs: lease ? this.keys.pttlOf(lease) : 0,
      term: this.keys.fence(keys),
      followers: this.hub.subscriberCount(keys.channel),
    };
  }
}
