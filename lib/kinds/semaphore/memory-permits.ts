import type { MemoryKindTwin } from '../kind-leases';
import { limitConflict } from './limit-conflict';
import type { SemaphoreLease } from '../../keys/lease-kind';
import type { LockRedisKeys } from '../../keys/lock-keys';
import type { LockHolderInfo, RawHolders, RawLockInfo } from '../../backends/lock-info';
import type { MemoryKeyspace } from '../../backends/memory-keyspace';

/** One semaphore: its limit, each permit's lease end on the keyspace's clock, and its holder. */
export interface Semaphore {
  limit: number;
  permits: Map<string, number>;
  /** Who holds each permit (the scripts' holder-record hash, which lives as the permits do). */
  holders: Map<string, LockHolderInfo>;
}

const notWholeMs = (): Error => new Error('ERR value is not an integer or out of range');

/**
 * The semaphores of the in-memory backend, with the replies of the permit scripts: busy while a
 * mutex, a writer or readers hold the lock's name (the permits hold it otherwise); a permit lives
 * through the ms its lease ends in and is gone after it; the limit must match while anyone holds
 * the key; the fence counter (shared with the keyspace) outlives the latest lease by the
 * retention; every change is atomic. `publish` sends a release message on a lock's channel.
 */
export class MemoryPermits implements MemoryKindTwin {
  private readonly semaphores = new Map<string, Semaphore>();

  constructor(
    private readonly space: MemoryKeyspace,
    private readonly publish: (channel: string, message: string) => void,
    /** Written as the holder of each permit this process's own tries are granted. */
    private readonly instanceId: string,
  ) {
    space.holdsShares('semaphore', (name) => {
      const semaphore = this.liveAt(name);
      return semaphore && this.latestEnd(semaphore);
    });
  }

  acquire(keys: LockRedisKeys, token: string, ttl: number): number {
    const others = this.othersLeft(keys);
    if (others !== undefined) return -others;
    const held = this.held(keys);
    const { permits } = keys.kind as SemaphoreLease;
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
    if (keys.kind.type !== 'semaphore') throw new Error('not a permit lease');
    const held = this.live(keys);
    const { permits } = keys.kind;
    if (held && held.limit !== permits) {
      throw limitConflict(keys.lock, held.limit, permits);
    }
    return held;
  }

  /**
   * Gives `token` a place for `ttl` ms, held by `instanceId` (default: this process's; undefined
   * writes no record, as a hand-off to a waiter that queued without an id); a new semaphore takes
   * the limit `limit` (default: the one `keys` names). Resolves its fence.
   */
  grant(
    keys: LockRedisKeys,
    token: string,
    ttl: number,
    limit = (keys.kind as SemaphoreLease).permits,
    instanceId: string | undefined = this.instanceId,
  ): number {
    if (!Number.isInteger(ttl) || ttl <= 0) throw notWholeMs();
    const semaphore = this.live(keys) ?? {
      limit,
      permits: new Map<string, number>(),
      holders: new Map<string, LockHolderInfo>(),
    };
    semaphore.permits.set(token, this.space.now() + ttl);
    // A re-sent grant keeps its record (HSETNX).
    if (instanceId !== undefined && !semaphore.holders.has(token)) {
      semaphore.holders.set(token, { instanceId, since: Date.now() });
    }
    this.semaphores.set(keys.lock, semaphore);
    const fence = this.space.nextFence(keys, ttl);
    this.space.fenceFollows(keys, this.latestEnd(semaphore));
    return fence;
  }

  /**
   * Ms until another kind may leave the lock's name — a mutex's or writer's lease, the readers'
   * last share — or undefined when none holds it, as the permit scripts read it (otherKindLua).
   */
  othersLeft(keys: LockRedisKeys): number | undefined {
    const lease = this.space.lease(keys);
    if (lease) return this.space.refusedBy(lease);
    const readersUntil = this.space.sharesUntil(keys.lock, 'semaphore');
    return readersUntil === undefined ? undefined : Math.ceil(readersUntil - this.space.now());
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
    held.holders.delete(token);
    if (held.permits.size === 0) this.semaphores.delete(keys.lock);
    return true;
  }

  /** A forced release: every permit goes, records too, one release message each; the removed. */
  evict(keys: LockRedisKeys): RawHolders {
    const removed = this.holdersRaw(keys);
    this.semaphores.delete(keys.lock);
    for (let i = 0; i < removed.length / 2; i++) this.publish(keys.channel, '1');
    return removed;
  }

  /** The semaphore as the inspect script reads it (the fair queue's waiters from `waiters`). */
  inspect(keys: LockRedisKeys, waiters: (string | null)[]): RawLockInfo['semaphore'] {
    const limit = this.live(keys)?.limit ?? 0;
    return { limit, fence: this.space.fence(keys), permits: this.holdersRaw(keys), waiters };
  }

  /** The names of the semaphores with a live permit (what SCAN would find). */
  names(): string[] {
    return [...this.semaphores.keys()].filter((name) => {
      const semaphore = this.semaphores.get(name)!;
      return [...semaphore.permits.values()].some((ends) => ends >= this.space.now());
    });
  }

  /** The live permits, the soonest lease end first, flat: ms left, record (or null). */
  private holdersRaw(keys: LockRedisKeys): RawHolders {
    const held = this.live(keys);
    if (!held) return [];
    const now = this.space.now();
    return [...held.permits]
      .sort(([a, x], [b, y]) => x - y || (a < b ? -1 : 1))
      .flatMap(([token, ends]) => {
        const holder = held.holders.get(token);
        return [Math.ceil(ends - now), holder ? `${holder.since} ${holder.instanceId}` : null];
      });
  }

  /** The live permits of the lock's semaphore (lapsed ones dropped), or undefined when none. */
  live(keys: LockRedisKeys): Semaphore | undefined {
    return this.liveAt(keys.lock);
  }

  private liveAt(name: string): Semaphore | undefined {
    const semaphore = this.semaphores.get(name);
    if (!semaphore) return undefined;
    const now = this.space.now();
    for (const [token, ends] of semaphore.permits) {
      if (ends >= now) continue;
      semaphore.permits.delete(token);
      semaphore.holders.delete(token);
    }
    if (semaphore.permits.size > 0) return semaphore;
    this.semaphores.delete(name);
    return undefined;
  }

  private latestEnd(semaphore: Semaphore): number {
    return Math.max(...semaphore.permits.values());
  }
}
