import type { LockBackend } from '../backends/lock-backend';
import {
  lockInfoOf,
  type EvictedLock,
  type ListedLock,
  type LockInfo,
  type LockListPage,
} from '../backends/lock-info';
import { LockRedisKeys, lockRedisKeys, userKeyOf } from '../keys/lock-keys';

/** Runs one backend command within `commandTimeout`; `subject` names what it was about. */
export type BoundedCommand = <T>(
  command: Promise<T>,
  operation: string,
  subject: string,
) => Promise<T>;

/**
 * The operator's side of the locks of one prefix: reading a lock (holder, lease, fence, queue),
 * listing the held ones, and removing one whoever holds it. Reads write nothing, and what they
 * answer is a snapshot, stale as soon as it is read.
 */
export class LockInspection {
  constructor(
    private readonly backend: LockBackend,
    private readonly prefix: string,
    private readonly bounded: BoundedCommand,
  ) {}

  /** One atomic reading of `key`'s lock, its holder record and its fair queue. */
  async inspect(key: string): Promise<LockInfo> {
    const keys = lockRedisKeys(this.prefix, key);
    const raw = await this.bounded(this.backend.inspectRaw(keys), 'inspect', `lock "${key}"`);
    return lockInfoOf(raw);
  }

  /**
   * One page of the held locks under the prefix: SCAN (every primary of a Cluster), then one
   * inspection per lock found, in parallel; a lock freed in between is left out.
   */
  async list(cursor: string | undefined, count: number): Promise<LockListPage> {
    const { prefix } = this;
    const page = await this.bounded(this.backend.scan(prefix, cursor, count), 'SCAN', prefix);
    const found = await Promise.all(
      page.names.map(async (name): Promise<ListedLock> => {
        const inspected = this.backend.inspectRaw(new LockRedisKeys(name));
        const raw = await this.bounded(inspected, 'inspect', `lock "${name}"`);
        return { key: userKeyOf(prefix, name), ...lockInfoOf(raw) };
      }),
    );
    const locks = found.filter((lock) => lock.held);
    return page.cursor === undefined ? { locks } : { locks, cursor: page.cursor };
  }

  async isLocked(key: string): Promise<boolean> {
    const keys = lockRedisKeys(this.prefix, key);
    return this.bounded(this.backend.isLocked(keys), 'EXISTS', `lock "${key}"`);
  }

  async forceRelease(key: string): Promise<boolean> {
    const keys = lockRedisKeys(this.prefix, key);
    return this.bounded(this.backend.forceRelease(keys), 'force-release', `lock "${key}"`);
  }

  /** Deletes `key`'s lock whoever holds it; resolves what it removed (null: it was free). */
  evict(key: string): Promise<EvictedLock | null> {
    const keys = lockRedisKeys(this.prefix, key);
    return this.bounded(this.backend.evict(keys), 'force-release', `lock "${key}"`);
  }
}
