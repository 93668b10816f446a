import type { LockBackend } from '../backends/lock-backend';
import {
  heldKinds,
  lockInfoOf,
  type ListedLock,
  type LockInfo,
  type LockListPage,
} from '../backends/lock-info';
import { type EvictedLock } from '../backends/lock-eviction';
import { kindKeysOf, lockNameOf, lockRedisKeys, userKeyOf } from '../keys/lock-keys';

/** Runs one backend command within `commandTimeout`; `subject` names what it was about. */
export type BoundedCommand = <T>(
  command: Promise<T>,
  operation: string,
  subject: string,
) => Promise<T>;

/**
 * The operator's side of the locks of one prefix, of every kind (a mutex or writer, a read lock's
 * readers, a semaphore's permits): reading a key (holders, leases, fence, queue), listing the
 * held locks, and removing every holder of a key whoever holds it. Reads write nothing, and what
 * they answer is a snapshot, stale as soon as it is read.
 */
export class LockInspection {
  constructor(
    private readonly backend: LockBackend,
    private readonly prefix: string,
    private readonly bounded: BoundedCommand,
  ) {}

  /** One atomic reading of every kind of lock on `key`, their holder records and fair queues. */
  async inspect(key: string): Promise<LockInfo> {
    const keys = lockRedisKeys(this.prefix, key);
    const raw = await this.bounded(this.backend.inspectRaw(keys), 'inspect', `lock "${key}"`);
    return lockInfoOf(raw);
  }

  /**
   * One page of the held locks under the prefix, of every kind: SCAN (every primary of a Cluster)
   * for the names the suffix table calls locks, then one inspection per lock found, in parallel,
   * read as the kind that holds it (one per key); a lock freed in between is left out.
   */
  async list(cursor: string | undefined, count: number): Promise<LockListPage> {
    const { prefix } = this;
    const page = await this.bounded(this.backend.scan(prefix, cursor, count), 'SCAN', prefix);
    const found = await Promise.all(
      page.names.map(async (name): Promise<ListedLock | undefined> => {
        const lock = lockNameOf(name);
        if (!lock) return undefined;
        const inspected = this.backend.inspectRaw(kindKeysOf(lock.base).exclusive);
        const raw = await this.bounded(inspected, 'inspect', `lock "${name}"`);
        // A name several kinds share (a writer's string or the readers' set) holds one of them.
        const kind = heldKinds(raw).find((held) => lock.kinds.includes(held));
        if (!kind) return undefined;
        return { key: userKeyOf(prefix, lock.base), ...lockInfoOf(raw, kind) };
      }),
    );
    const locks = found.filter((lock): lock is ListedLock => lock?.held === true);
    return page.cursor === undefined ? { locks } : { locks, cursor: page.cursor };
  }

  /** Whether `key` is held in any way (as `inspect(key).held`). */
  async isLocked(key: string): Promise<boolean> {
    const keys = lockRedisKeys(this.prefix, key);
    return this.bounded(this.backend.isLocked(keys), 'inspect', `lock "${key}"`);
  }

  /** Removes every holder of every kind of lock on `key`; whether there was any. */
  async forceRelease(key: string): Promise<boolean> {
    const keys = lockRedisKeys(this.prefix, key);
    return this.bounded(this.backend.forceRelease(keys), 'force-release', `lock "${key}"`);
  }

  /** Removes every holder of `key`, whoever; resolves what it removed (null: it was free). */
  evict(key: string): Promise<EvictedLock | null> {
    const keys = lockRedisKeys(this.prefix, key);
    return this.bounded(this.backend.evict(keys), 'force-release', `lock "${key}"`);
  }
}
