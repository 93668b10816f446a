import type { AcquireTry } from '../../backends/lock-backend';
import type { MemoryKeyspace } from '../../backends/memory-keyspace';
import type { MemoryPubSubHub } from '../../backends/memory-pubsub';
import type { LockRedisKeys } from '../../keys/lock-keys';
import type { MemoryKindTwin } from '../kind-leases';
import type { MemoryReadLeases } from '../read/memory-read';

/**
 * Exclusive leases in memory, as the exclusive scripts keep them: a mutex, or a read-write lock's
 * writer (refused while readers or a semaphore's permits hold the name; with writer priority,
 * entered among the writers waiting). Each method is one command's body: the memory store runs it atomically.
 */
export class MemoryExclusiveLeases implements MemoryKindTwin {
  constructor(
    private readonly keys: MemoryKeyspace,
    /** The readers' shares, which hold a writer back. */
    private readonly shared: MemoryReadLeases,
    private readonly hub: MemoryPubSubHub,
  ) {}

  acquire(keys: LockRedisKeys, token: string, ttl: number, how?: AcquireTry): number {
    // Readers or permits hold the name: wait for the last of them, as a writer waits for readers.
    const sharesUntil = this.keys.sharesUntil(keys.lock);
    if (sharesUntil !== undefined) {
      return this.shared.refused(keys, sharesUntil - this.keys.now(), how, true);
    }
    const holder = this.keys.lease(keys);
    if (!holder) {
      const lease = this.keys.setLease(keys, token, ttl); // the token names its holder
      // A writer that waited held new readers back: its release must wake them (acquire.script).
      if (this.shared.granted(keys, how)) lease.waited = true;
      return this.keys.nextFence(keys, ttl);
    }
    // Our own grant, asked again: the fence it got (the counter cannot have moved since).
    if (holder.token === token) return this.keys.fence(keys);
    return this.shared.refused(keys, this.keys.refusedBy(holder), how, false);
  }

  extend(keys: LockRedisKeys, token: string, ms: number): boolean {
    return this.keys.pexpireIfOurs(keys, token, ms);
  }

  release(keys: LockRedisKeys, token: string): boolean {
    const lease = this.keys.lease(keys);
    if (lease?.token !== token) return false;
    this.keys.deleteLease(keys);
    // Only a lease a refused try marked wakes anyone (waited.lua).
    if (lease.waited) this.hub.publish(keys.channel, token);
    return true;
  }
}
