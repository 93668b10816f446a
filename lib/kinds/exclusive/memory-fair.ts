import type { MemoryFairTwin } from '../kind-leases';
import type { LockRedisKeys } from '../../keys/lock-keys';
import type { FairAcquireReply } from '../../backends/lock-backend';
import type { MemoryKeyspace } from '../../backends/memory-keyspace';
import type { MemoryPubSubHub } from '../../backends/memory-pubsub';

/**
 * Fair mode in memory, for `MemoryLockBackend`, as the fair scripts keep it: the queue of waiters
 * (entries that lapse after `waiterTtl`), a free lock reserved for the head of the queue, and the
 * hand-off to it on release. Each method is one command's body: the backend runs it atomically.
 */
export class MemoryFairQueue implements MemoryFairTwin {
  constructor(
    private readonly keys: MemoryKeyspace,
    private readonly hub: MemoryPubSubHub,
    /** Written into the holder record of each grant, as the option `instanceId`. */
    private readonly instanceId: string,
  ) {}

  acquire(
    keys: LockRedisKeys,
    token: string,
    ttl: number,
    queue: boolean,
    waiterTtl: number,
  ): FairAcquireReply {
    const now = this.keys.now();
    const waiting = this.keys.queue(keys);
    // Drop waiters at the head that stopped refreshing their entry (crashed, or left silently).
    for (const [waiter, entry] of waiting?.waiters ?? []) {
      if (entry.expiresAt > now) break;
      waiting?.waiters.delete(waiter);
    }
    const holder = this.keys.lease(keys);
    if (holder?.token === token) {
      return { ours: this.keys.fence(keys), pttl: this.keys.pttlOf(holder) };
    }
    const [head, headEntry] = waiting?.waiters.entries().next().value ?? [];
    // Readers or a semaphore's permits hold it: the head waits for the last one to leave.
    const sharesUntil = this.keys.sharesUntil(keys.lock);
    if (!holder && sharesUntil === undefined && (head === undefined || head === token)) {
      // No queue: the token names its holder (no record), as the script's first path grants it.
      const lease = this.keys.setLease(keys, token, ttl, waiting ? this.instanceId : undefined);
      // Out of the queue: marked, for whoever is still in line or the readers it held back.
      if (waiting) lease.waited = true;
      waiting?.waiters.delete(token);
      this.keys.dropQueueIfEmpty(keys);
      return { granted: this.keys.nextFence(keys, ttl) };
    }
    // Held: until its lease ends; free but reserved for the head: until the head's entry lapses.
    const retry = holder
      ? this.keys.refusedBy(holder)
      : (sharesUntil ?? headEntry?.expiresAt ?? now) - now;
    if (queue) this.keys.enqueue(keys, token, ttl, waiterTtl, this.instanceId);
    this.keys.dropQueueIfEmpty(keys);
    return { retryAfterMs: Math.max(0, retry), fence: this.keys.fence(keys) };
  }

  release(keys: LockRedisKeys, token: string): boolean {
    const waiting = this.keys.queue(keys);
    const queued = waiting?.waiters.delete(token) === true;
    const holder = this.keys.lease(keys);
    if (holder?.token !== token) {
      this.keys.dropQueueIfEmpty(keys);
      // The last in line left a free lock: readers held back by the queue may go in now.
      if (queued && !holder && !this.keys.queue(keys)) {
        this.hub.publish(keys.channel, `wake-all:${token}`);
      }
      return false;
    }
    this.keys.deleteLease(keys);
    // Nobody refused, no queue at the grant (see fair-release.script): nothing to hand over.
    if (!holder.waited) return true;
    const now = this.keys.now();
    for (const [head, entry] of waiting?.waiters ?? []) {
      waiting?.waiters.delete(head);
      if (entry.expiresAt <= now) continue; // lapsed: passed over
      // No longer than the entry would have lived: a waiter that died since its last refresh
      // holds the lock up for one entry lifetime at most.
      const handoff = Math.max(1, Math.floor(Math.min(entry.lease, entry.expiresAt - now)));
      this.keys.setLease(keys, head, handoff, entry.instanceId).waited = true; // as fair-release
      this.keys.dropQueueIfEmpty(keys);
      const fence = this.keys.nextFence(keys, handoff);
      this.hub.publish(keys.channel, `grant:${head}:${fence}`);
      return true;
    }
    this.keys.dropQueueIfEmpty(keys);
    this.hub.publish(keys.channel, token);
    return true;
  }
}
