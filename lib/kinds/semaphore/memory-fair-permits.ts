import type { MemoryFairTwin } from '../kind-leases';
import { limitConflict } from './limit-conflict';
import type { LockRedisKeys } from '../../keys/lock-keys';
import type { FairAcquireReply } from '../../backends/lock-backend';
import type { MemoryKeyspace } from '../../backends/memory-keyspace';
import type { MemoryPermits } from './memory-permits';

/**
 * One queued waiter for a permit: when its entry lapses, its hand-off lease, its limit N, and (as
 * the script's `:waiter-ids` hash and queue scores keep them) its instance id and arrival.
 */
interface PermitWaiter {
  lapsesAt: number;
  lease: number;
  permits: number;
  instanceId: string;
  /** When it joined the queue, epoch ms. */
  since: number;
}

/**
 * Fair mode for semaphores in memory, for `MemoryLockBackend`, as the fair permit scripts keep
 * it: waiters queue in arrival order (entries that lapse after `waiterTtl`), a free place goes to
 * a waiter only when fewer live waiters are ahead of it than places are free, and a release hands
 * every free place to the first live waiters. Each method is one command's body: the backend
 * runs it atomically.
 */
export class MemoryFairPermits implements MemoryFairTwin {
  /** Per semaphore, its waiters in arrival order (a Map keeps insertion order). */
  private readonly queues = new Map<string, Map<string, PermitWaiter>>();

  constructor(
    private readonly space: MemoryKeyspace,
    private readonly permits: MemoryPermits,
    private readonly publish: (channel: string, message: string) => void,
    /** Kept with each entry this process queues, for the holder record of a hand-off. */
    private readonly instanceId: string,
  ) {}

  acquire(
    keys: LockRedisKeys,
    token: string,
    ttl: number,
    queue: boolean,
    waiterTtl: number,
  ): FairAcquireReply {
    const others = this.permits.othersLeft(keys);
    if (others !== undefined) {
      // Another kind holds the name: busy, queued as for full permits (its release wakes us).
      if (queue)
        this.enqueue(keys, token, ttl, waiterTtl, (keys.kind as { permits: number }).permits);
      return { retryAfterMs: Math.max(0, others), fence: this.space.fence(keys) };
    }
    const held = this.permits.held(keys); // refuses another limit first
    const { permits } = keys.kind as { permits: number };
    // Already ours (a hand-off, or a re-sent try): granted anew with a fence of its own.
    if (!held?.permits.has(token)) {
      const count = held?.permits.size ?? 0;
      const free = permits - count;
      const { ahead, soonestLapse, askedAhead } = this.waitersAhead(keys, token, free);
      // With no holder left, the first live waiter's limit stands, as the holders' would.
      if (!held && askedAhead !== undefined && askedAhead !== permits) {
        throw limitConflict(keys.lock, askedAhead, permits);
      }
      if (ahead >= free) {
        const now = this.space.now();
        const lapse = soonestLapse === undefined ? Infinity : Math.ceil(soonestLapse - now);
        const retry = Math.min(held ? this.permits.soonestEnd(held) : Infinity, lapse);
        if (queue) this.enqueue(keys, token, ttl, waiterTtl, permits);
        return { retryAfterMs: Math.max(0, retry), fence: this.space.fence(keys) };
      }
    }
    this.leave(keys, token);
    return { granted: this.permits.grant(keys, token, ttl) };
  }

  /** Gives `token`'s permit back, or leaves the queue; hands free places on. Whether it held one. */
  release(keys: LockRedisKeys, token: string): boolean {
    const released = this.permits.take(keys, token);
    this.leave(keys, token);
    // Another kind holds the name: no place to hand on (its own release wakes the queue).
    if (this.permits.othersLeft(keys) !== undefined) return released;
    const waiting = this.queues.get(keys.lock);
    const now = this.space.now();
    const held = this.permits.live(keys);
    let count = held?.permits.size ?? 0;
    // With no holder left, the limit is the one the first live waiter asked for.
    let limit = held?.limit;
    let handed = 0;
    for (const [head, entry] of waiting ?? []) {
      const live = entry.lapsesAt > now;
      if (live) limit ??= entry.permits;
      const fits = live && entry.permits === limit;
      if (fits && count >= limit!) break;
      waiting!.delete(head);
      if (!fits) continue; // lapsed, or asking for another limit (refused at its next try)
      const handoff = Math.max(1, Math.floor(Math.min(entry.lease, entry.lapsesAt - now)));
      const fence = this.permits.grant(keys, head, handoff, limit, entry.instanceId);
      this.publish(keys.channel, `grant:${head}:${fence}`);
      count++;
      handed++;
    }
    this.dropIfEmpty(keys);
    if (released && handed === 0) this.publish(keys.channel, token);
    return released;
  }

  /** The queued waiters as the inspect script reads them: arrival (µs), instance id, … */
  waitersRaw(keys: LockRedisKeys): string[] {
    return [...(this.queue(keys)?.values() ?? [])].flatMap((entry) => [
      String(entry.since * 1_000),
      entry.instanceId,
    ]);
  }

  /** The queued waiters' tokens, first come first (lapsed entries included until dropped). */
  queued(keys: LockRedisKeys): string[] {
    return [...(this.queue(keys)?.keys() ?? [])];
  }

  /**
   * The live waiters ahead of `token`, counted up to `free`, and the earliest lapse among them;
   * lapsed entries met on the way are dropped, as the script does.
   */
  private waitersAhead(keys: LockRedisKeys, token: string, free: number) {
    const waiting = this.queue(keys);
    const now = this.space.now();
    let ahead = 0;
    let soonestLapse: number | undefined;
    let askedAhead: number | undefined;
    for (const [waiter, entry] of waiting ?? []) {
      if (ahead >= free || waiter === token) break;
      if (entry.lapsesAt > now) {
        ahead++;
        askedAhead ??= entry.permits;
        soonestLapse = Math.min(soonestLapse ?? Infinity, entry.lapsesAt);
      } else waiting!.delete(waiter);
    }
    this.dropIfEmpty(keys);
    return { ahead, soonestLapse, askedAhead };
  }

  /** Joins the queue at the back, or refreshes the entry in place. */
  private enqueue(
    keys: LockRedisKeys,
    token: string,
    ttl: number,
    waiterTtl: number,
    permits: number,
  ): void {
    const waiting = this.queue(keys) ?? new Map<string, PermitWaiter>();
    const lapsesAt = this.space.now() + waiterTtl;
    const since = waiting.get(token)?.since ?? Date.now(); // its place is kept: ZADD NX
    const { instanceId } = this;
    waiting.set(token, { lapsesAt, lease: Math.min(ttl, waiterTtl), permits, instanceId, since });
    this.queues.set(keys.lock, waiting);
  }

  private leave(keys: LockRedisKeys, token: string): void {
    this.queue(keys)?.delete(token);
    this.dropIfEmpty(keys);
  }

  /** The queue of `keys`, or undefined: it goes, as Redis' keys do, once every entry lapsed. */
  private queue(keys: LockRedisKeys): Map<string, PermitWaiter> | undefined {
    const waiting = this.queues.get(keys.lock);
    const now = this.space.now();
    if (waiting && [...waiting.values()].every((entry) => entry.lapsesAt <= now)) {
      this.queues.delete(keys.lock);
      return undefined;
    }
    return waiting;
  }

  /** Redis deletes an emptied ZSET or HASH. */
  private dropIfEmpty(keys: LockRedisKeys): void {
    if (this.queues.get(keys.lock)?.size === 0) this.queues.delete(keys.lock);
  }
}
