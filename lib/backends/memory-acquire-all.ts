import type { LockRedisKeys } from '../keys/lock-keys';
import type { AcquireAllReply } from './lock-backend';
import type { MemoryKeyspace } from './memory-keyspace';

/** Multi-key locks in memory, for `MemoryLockBackend`: the all-or-nothing grant of several. */
export class MemoryAcquireAll {
  constructor(private readonly keys: MemoryKeyspace) {}

  /**
   * All or none, as the script does: the first busy lock — held by another token, or by live
   * readers or permits — and the ms until it may free mean nothing written.
   */
  acquire(keys: readonly LockRedisKeys[], tokens: readonly string[], ttl: number): AcquireAllReply {
    const now = this.keys.now();
    const busyFor = (k: LockRedisKeys, token: string | undefined): number | undefined => {
      const holder = this.keys.lease(k);
      if (holder !== undefined && holder.token !== token) return this.keys.refusedBy(holder);
      // Readers or a semaphore's permits hold the name.
      const sharesUntil = this.keys.sharesUntil(k.lock);
      return sharesUntil === undefined ? undefined : Math.max(0, sharesUntil - now);
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
