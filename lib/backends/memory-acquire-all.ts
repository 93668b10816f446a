import type { LockRedisKeys } from '../keys/lock-keys';
import type { AcquireAllReply } from './lock-backend';
import type { MemoryKeyspace } from './memory-keyspace';
import type { MemoryReadLeases } from '../kinds/read/memory-read';

/** Multi-key locks in memory, for `MemoryLockBackend`: the all-or-nothing grant of several. */
export class MemoryAcquireAll {
  constructor(
    private readonly keys: MemoryKeyspace,
    /** Read-write locks: a lock its readers hold is busy. */
    private readonly shared: MemoryReadLeases,
  ) {}

  /**
   * All or none, as the script does: the first busy lock — held by another token, or by live
   * readers — and the ms until it may free mean nothing written.
   */
  acquire(keys: readonly LockRedisKeys[], tokens: readonly string[], ttl: number): AcquireAllReply {
    const now = this.keys.now();
    const busyFor = (k: LockRedisKeys, token: string | undefined): number | undefined => {
      const holder = this.keys.lease(k);
      if (holder !== undefined && holder.token !== token) return this.keys.pttlOf(holder);
      const readersUntil = this.shared.readersUntil(k);
      return readersUntil === undefined ? undefined : Math.max(0, readersUntil - now);
    };
    for (const [i, k] of keys.entries()) {
      const retryAfterMs = busyFor(k, tokens[i]);
      if (retryAfterMs !== undefined) return { busy: i, retryAfterMs };
    }
    const fences = keys.map((k, i) => {
      if (this.keys.lease(k)) return this.keys.fence(k); // ours: a re-sent command
      this.keys.setLease(k, tokens[i]!, ttl); // each token names its holder
      return this.keys.nextFence(k, ttl);
    });
    return { fences };
  }
}
