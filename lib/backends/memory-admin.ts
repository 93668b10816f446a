import { kindKeysOf, type LockRedisKeys } from '../keys/lock-keys';
import { type RawLockInfo } from './lock-info';
import { evictedOf, type EvictedLock } from './lock-eviction';
import type { MemoryFairPermits } from '../kinds/semaphore/memory-fair-permits';
import { rawInfoOf, type MemoryKeyspace } from './memory-keyspace';
import type { MemoryPermits } from '../kinds/semaphore/memory-permits';
import type { MemoryReadLeases } from '../kinds/read/memory-read';

/** What the in-memory backend keeps, for the operator's commands that read or clear it all. */
export interface MemoryKinds {
  readonly space: MemoryKeyspace;
  readonly shared: MemoryReadLeases;
  readonly permits: MemoryPermits;
  readonly fairPermits: MemoryFairPermits;
  readonly publish: (channel: string, message: string) => void;
}

/**
 * The operator's commands of `MemoryLockBackend`, as `RedisAdmin` runs them on Redis: every kind
 * of lock on the key `keys` names (of any kind), read — as the inspect script reads them — or
 * removed, as the force-release script removes them. Each is one command's body.
 */
export function inspectKinds(kinds: MemoryKinds, keys: LockRedisKeys): RawLockInfo {
  const { exclusive, semaphore } = kindKeysOf(keys.lock);
  return {
    ...rawInfoOf(kinds.space, exclusive),
    readers: kinds.shared.readersRaw(exclusive),
    writersWaiting: kinds.shared.writersWaiting(exclusive),
    semaphore: kinds.permits.inspect(semaphore, kinds.fairPermits.waitersRaw(semaphore)),
  };
}

/**
 * Removes every holder of every kind on the key `keys` names, as the force-release script does:
 * the exclusive lock (waking its waiters), the readers and the permits (each kind's removal wakes
 * its own waiters), their holder records with them; fence counters and fair queues stay. Answers
 * every kind removed (`evictedOf`), or null when nothing was held.
 */
export function evictKinds(kinds: MemoryKinds, keys: LockRedisKeys): EvictedLock | null {
  const { space } = kinds;
  const { exclusive, semaphore } = kindKeysOf(keys.lock);
  const lease = space.lease(exclusive);
  if (lease) {
    space.deleteLease(exclusive);
    kinds.publish(exclusive.channel, '1');
  }
  const readers = kinds.shared.evict(exclusive);
  const permits = kinds.permits.evict(semaphore);
  const { holder } = rawInfoOf(space, exclusive, lease);
  const [fence, permitFence] = [space.fence(exclusive), space.fence(semaphore)];
  return evictedOf({ deleted: !!lease, fence, holder, readers, permits, permitFence });
}
