import { RedisLockConfigError } from '../errors/redis-lock-config.error';
import { SemaphoreLimitConflictError } from '../errors/semaphore-limit-conflict.error';
import { semaphoreMessages } from '../errors/semaphore-messages';
import type { PermitLease } from '../keys/lease-kind';
import type { LockRedisKeys } from '../keys/lock-keys';
import type { EvictedLock } from './lock-info';
import type { MemoryKeyspace } from './memory-keyspace';

/** One semaphore: its limit, and each permit's lease end on the keyspace's clock. */
export interface Semaphore {
  limit: number;
  permits: Map<string, number>;
}

const notWholeMs = (): Error => new Error('ERR value is not an integer or out of range');

/**
 * The semaphores of the in-memory backend, with the replies of the permit scripts: a permit lives
 * through the ms its lease ends in and is gone after it; the limit must match while anyone holds
 * the key; the fence counter (shared with the keyspace) outlives the latest lease by the
 * retention; every change is atomic. `publish` sends a release message on a lock's channel.
 */
export class MemoryPermits {
  private readonly semaphores = new Map<string, Semaphore>();

  constructor(
    private readonly space: MemoryKeyspace,
    private readonly publish: (channel: string, message: string) => void,
  ) {}

  acquire(keys: LockRedisKeys, token: string, ttl: number): number {
    const held = this.held(keys);
    const { permits } = keys.kind as PermitLease;
    // A re-sent grant keeps its place and gets a fence of its own, as in the Redis script.
    if (held && held.permits.size >= permits && !held.permits.has(token)) {
      return -this.soonestEnd(held);
    }
    return this.grant(keys, token, ttl);
  }

  /**
   * The live permits of a permit lease's semaphore (lapsed ones dropped), or undefined when none;
   * refuses a lease naming another limit than the holders', as every permit script does first.
   */
  held(keys: LockRedisKeys): Semaphore | undefined {
    if (keys.kind.type !== 'permit') throw new Error('not a permit lease');
    const held = this.live(keys);
    const { permits } = keys.kind;
    if (held && held.limit !== permits) {
      const message = semaphoreMessages.limitConflict(keys.lock, held.limit, permits);
      throw new SemaphoreLimitConflictError(message, held.limit, permits);
    }
    return held;
  }

  /**
   * Gives `token` a place for `ttl` ms; a new semaphore takes the limit `limit` (default: the one
   * `keys` names). Resolves its fence.
   */
  grant(
    keys: LockRedisKeys,
    token: string,
    ttl: number,
    limit = (keys.kind as PermitLease).permits,
  ): number {
    if (!Number.isInteger(ttl) || ttl <= 0) throw notWholeMs();
    const semaphore = this.live(keys) ?? { limit, permits: new Map<string, number>() };
    semaphore.permits.set(token, this.space.now() + ttl);
    this.semaphores.set(keys.lock, semaphore);
    const fence = this.space.nextFence(keys, ttl);
    this.space.fenceFollows(keys, this.latestEnd(semaphore));
    return fence;
  }

  /** Ms until the soonest permit lease of `held` ends (0: in this one), as the busy reply says. */
  soonestEnd(held: Semaphore): number {
    return Math.max(0, Math.ceil(Math.min(...held.permits.values()) - this.space.now()));
  }

  extend(keys: LockRedisKeys, token: string, ms: number): boolean {
    const held = this.live(keys);
    if (!held?.permits.has(token)) return false;
    if (!Number.isInteger(ms) || ms <= 0) throw notWholeMs();
    held.permits.set(token, this.space.now() + ms);
    this.space.fenceFollows(keys, this.latestEnd(held));
    return true;
  }

  release(keys: LockRedisKeys, token: string): boolean {
    if (!this.take(keys, token)) return false;
    this.publish(keys.channel, token);
    return true;
  }

  /** Removes `token`'s permit, and the semaphore with its last one; whether it was live. */
  take(keys: LockRedisKeys, token: string): boolean {
    const held = this.live(keys);
    if (!held?.permits.delete(token)) return false;
    if (held.permits.size === 0) this.semaphores.delete(keys.lock);
    return true;
  }

  /** Removes every permit (`remove`) or only looks; what was held, or null when nothing. */
  evict(keys: LockRedisKeys, remove: boolean): EvictedLock | null {
    const held = this.live(keys);
    if (!held) return null;
    if (remove) {
      this.semaphores.delete(keys.lock);
      for (let i = 0; i < held.permits.size; i++) this.publish(keys.channel, '1');
    }
    return { fence: this.space.fence(keys) };
  }

  inspect(keys: LockRedisKeys): never {
    throw new RedisLockConfigError(semaphoreMessages.notInspectable(keys.lock));
  }

  /** The live permits of the lock's semaphore (lapsed ones dropped), or undefined when none. */
  live(keys: LockRedisKeys): Semaphore | undefined {
    const semaphore = this.semaphores.get(keys.lock);
    if (!semaphore) return undefined;
    const now = this.space.now();
    for (const [token, ends] of semaphore.permits) {
      if (ends < now) semaphore.permits.delete(token);
    }
    if (semaphore.permits.size > 0) return semaphore;
    this.semaphores.delete(keys.lock);
    return undefined;
  }

  private latestEnd(semaphore: Semaphore): number {
    return Math.max(...semaphore.permits.values());
  }
}
