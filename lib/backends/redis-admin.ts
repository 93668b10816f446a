import { kindKeysOf, type LockRedisKeys } from '../keys/lock-keys';
import { forceReleaseScript } from '../lua/force-release.script';
import { inspectScript } from '../lua/inspect.script';
import { isLockedScript } from '../lua/is-locked.script';
import type { PublishCommand } from '../lua/lua-script';
import type { RedisCommander } from '../redis/redis-client';
import { type RawLockInfo } from './lock-info';
import { evictedOf, type EvictedLock } from './lock-eviction';

/**
 * The operator's commands of `RedisBackend` on one key, for every kind of lock on it at once
 * (the exclusive lock, a read lock's readers, the semaphore: one hash tag, so one script reaches
 * them all, on a Cluster too): read them, or remove every holder. `keys` may name any kind; the
 * key's other kinds are found from it.
 */
export class RedisAdmin {
  constructor(
    private readonly client: RedisCommander,
    /** The command releases publish with now, and the channel name as subscribers know it. */
    private readonly publishing: () => { publish: PublishCommand; channel: (c: string) => string },
  ) {}

  /** Reads every kind of lock on the key in one atomic step; writes nothing. */
  async inspect(keys: LockRedisKeys): Promise<RawLockInfo> {
    const { exclusive: lock, semaphore } = kindKeysOf(keys.lock);
    const reply = await inspectScript.run(
      this.client,
      [
        lock.lock,
        lock.fence,
        lock.holder,
        lock.queue,
        lock.waiterIds,
        lock.readerHolders,
        lock.writersWaiting,
        semaphore.permitLimit,
        semaphore.fence,
        semaphore.permitHolders,
        semaphore.queue,
        semaphore.waiterIds,
      ],
      [],
    );
    const [token, pttl, fence, holder, waiters, readers, writersWaiting] = reply;
    const [, , , , , , , limit, permitFence, permits, permitWaiters] = reply;
    return {
      token,
      pttl,
      fence,
      holder,
      waiters,
      readers,
      writersWaiting,
      semaphore: { limit, fence: permitFence, permits, waiters: permitWaiters },
    };
  }

  /**
   * Whether any kind is held, as `inspect` reads it held, from one light script: the lock, and a
   * count of the live readers or permits under it (no records, no queues).
   */
  async isLocked(keys: LockRedisKeys): Promise<boolean> {
    const { exclusive: lock } = kindKeysOf(keys.lock);
    return (await isLockedScript.run(this.client, [lock.lock, lock.permitLimit], [])) === 1;
  }

  /** Removes every holder of every kind on the key; what it removed, or null when nothing. */
  async evict(keys: LockRedisKeys): Promise<EvictedLock | null> {
    const { exclusive: lock, semaphore } = kindKeysOf(keys.lock);
    const { publish, channel } = this.publishing();
    const [deleted, fence, holder, readers, permits, permitFence] = await forceReleaseScript.run(
      this.client,
      [
        lock.lock,
        lock.fence,
        lock.holder,
        lock.readerHolders,
        semaphore.permitLimit,
        semaphore.fence,
        semaphore.permitHolders,
      ],
      [publish, channel(lock.channel)],
    );
    return evictedOf({ deleted: deleted === 1, fence, holder, readers, permits, permitFence });
  }
}
