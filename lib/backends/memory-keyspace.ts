import type { LockRedisKeys } from '../keys/lock-keys';
import { holderOfToken, type LockHolderInfo, type RawLockInfo } from './lock-info';

/** A value with a deadline on the keyspace's clock (`Infinity`: none). */
interface Expiring {
  expiresAt: number;
}
export interface Lease extends Expiring {
  token: string;
  /** A refused try marked it (the scripts' `*` before the token): its release publishes. */
  waited?: boolean;
  /** The holder record, which Redis keeps in a key of its own with the lease's expiry. */
  holder?: LockHolderInfo;
}
interface Counter extends Expiring {
  value: number;
}
/** Fair mode: one queued waiter — when its entry lapses, and the lease a hand-off gives it. */
export interface WaiterEntry {
  expiresAt: number;
  lease: number;
  /** Its instance id, and when it joined the queue (epoch ms). */
  instanceId: string;
  since: number;
}
/** Fair mode: the waiters of one lock in arrival order (a Map keeps insertion order). */
export interface Queue extends Expiring {
  waiters: Map<string, WaiterEntry>;
}

const notWholeMs = (): Error => new Error('ERR value is not an integer or out of range');

/**
 * The keys of the in-memory backend, with Redis' expiry: a key lives through the millisecond in
 * which its PTTL reaches 0 and is gone after it (deleted when next looked at).
 */
export class MemoryKeyspace {
  private readonly locks = new Map<string, Lease>();
  private readonly counters = new Map<string, Counter>();
  private readonly queues = new Map<string, Queue>();
  /**
   * The kinds whose holders are sets of shares under a lock's name (readers, permits), each
   * saying until when (this clock) its shares hold a name: the other kinds refuse it meanwhile,
   * as the scripts refuse a name whose key is another kind's sorted set.
   */
  private readonly shareSets = new Map<string, (name: string) => number | undefined>();

  constructor(
    readonly now: () => number,
    private readonly fenceRetention: number,
  ) {}

  /** Registers a kind whose holders are shares under lock names (see `sharesUntil`). */
  holdsShares(kind: string, until: (name: string) => number | undefined): void {
    this.shareSets.set(kind, until);
  }

  /**
   * Until when (this clock) the shares of a kind other than `except` hold lock `name`, or
   * undefined when none does. A share counts through the ms its lease ends in, whichever kind
   * (lock-type.lua reads another kind's set so, cutting no holder of either short).
   */
  sharesUntil(name: string, except?: string): number | undefined {
    for (const [kind, until] of this.shareSets) {
      if (kind === except) continue;
      const end = until(name);
      if (end !== undefined) return end;
    }
    return undefined;
  }

  lease(keys: LockRedisKeys): Lease | undefined {
    return this.live(this.locks, keys.lock);
  }

  deleteLease(keys: LockRedisKeys): void {
    this.locks.delete(keys.lock);
  }

  /** The fence counter as it stands (0 when it lapsed or never existed). */
  fence(keys: LockRedisKeys): number {
    return this.live(this.counters, keys.fence)?.value ?? 0;
  }

  /**
   * A try refused by `lease`: marks it as waited for, so its release publishes (waited.lua), and
   * answers its PTTL.
   */
  refusedBy(lease: Lease): number {
    lease.waited = true;
    return this.pttlOf(lease);
  }

  /** PTTL: whole ms left, 0 in the last one. */
  pttlOf(entry: Expiring): number {
    return Math.max(0, Math.ceil(entry.expiresAt - this.now()));
  }

  /**
   * `SET <lock> <token> PX <ms>`, and the holder record beside it (none: an older version's).
   * Returns the lease written.
   */
  setLease(keys: LockRedisKeys, token: string, ms: number, instanceId?: string): Lease {
    if (!Number.isInteger(ms) || ms <= 0) throw notWholeMs();
    // As the scripts read it: fair mode's record of this grant (its token's since is when the call
    // began), else the token, which names its holder.
    const holder =
      instanceId === undefined ? holderOfToken(token) : { instanceId, since: Date.now() };
    const lease: Lease = { token, expiresAt: this.now() + ms, holder };
    this.locks.set(keys.lock, lease);
    return lease;
  }

  /** The names of the locks held now, in order (what SCAN would find, minus the fuzz). */
  lockNames(): string[] {
    return [...this.locks.keys()].filter((name) => this.live(this.locks, name)).sort();
  }

  /** Compare-and-pexpire of the lock and its counter (which follows the lease). */
  pexpireIfOurs(keys: LockRedisKeys, token: string, ms: number): boolean {
    const lease = this.lease(keys);
    if (lease?.token !== token) return false;
    if (!Number.isInteger(ms) || ms <= 0) throw notWholeMs();
    const counter = this.live(this.counters, keys.fence);
    if (counter) counter.expiresAt = this.now() + ms + this.fenceRetention;
    lease.expiresAt = this.now() + ms;
    return true;
  }

  /**
   * The next fence of a grant with a lease of `lease` ms, which the counter outlives by the
   * retention. A new counter starts from the clock in µs, above the fences handed out before.
   */
  nextFence(keys: LockRedisKeys, lease: number): number {
    const counter = this.live(this.counters, keys.fence);
    const fence = counter ? counter.value + 1 : Math.max(1, Math.floor(this.now() * 1_000));
    const expiresAt = this.now() + lease + this.fenceRetention;
    this.counters.set(keys.fence, { value: fence, expiresAt });
    return fence;
  }

  /** Makes a live fence counter outlive `until` (a lease end) by the retention, as PEXPIRE does. */
  fenceFollows(keys: LockRedisKeys, until: number): void {
    const counter = this.live(this.counters, keys.fence);
    if (counter) counter.expiresAt = until + this.fenceRetention;
  }

  /**
   * A reader's fence: the counter as it stands (a new one from the clock in µs, as a writer's
   * first grant starts it), kept at least `lease` + the retention (never shortened).
   */
  readFence(keys: LockRedisKeys, lease: number): number {
    const expiresAt = this.now() + lease + this.fenceRetention;
    const counter = this.live(this.counters, keys.fence) ?? {
      value: Math.max(1, Math.floor(this.now() * 1_000)),
      expiresAt,
    };
    counter.expiresAt = Math.max(counter.expiresAt, expiresAt);
    this.counters.set(keys.fence, counter);
    return counter.value;
  }

  queue(keys: LockRedisKeys): Queue | undefined {
    return this.live(this.queues, keys.queue);
  }

  /** Joins the queue (or refreshes its entry); the queue lives as long as its last entry may. */
  enqueue(
    keys: LockRedisKeys,
    token: string,
    ttl: number,
    waiterTtl: number,
    instanceId: string,
  ): void {
    const now = this.now();
    let waiting = this.queue(keys);
    if (!waiting) {
      waiting = { waiters: new Map(), expiresAt: Infinity };
      this.queues.set(keys.queue, waiting);
    }
    const since = waiting.waiters.get(token)?.since ?? Date.now();
    const lease = Math.min(ttl, waiterTtl);
    waiting.waiters.set(token, { expiresAt: now + waiterTtl, lease, instanceId, since });
    if (waiting.expiresAt === Infinity || this.pttlOf(waiting) < waiterTtl) {
      waiting.expiresAt = now + waiterTtl;
    }
  }

  /** Redis deletes an emptied ZSET or HASH. */
  dropQueueIfEmpty(keys: LockRedisKeys): void {
    if (this.queues.get(keys.queue)?.waiters.size === 0) this.queues.delete(keys.queue);
  }

  /** The entry under `key` if it has not expired; an expired one is deleted on the way. */
  private live<T extends Expiring>(map: Map<string, T>, key: string): T | undefined {
    const entry = map.get(key);
    if (entry && this.now() > entry.expiresAt) {
      map.delete(key);
      return undefined;
    }
    return entry;
  }
}

/** What the inspect script answers for `keys`, read from `space` (`lease`: the one it holds). */
export function rawInfoOf(
  space: MemoryKeyspace,
  keys: LockRedisKeys,
  lease = space.lease(keys),
): RawLockInfo {
  const waiters = [...(space.queue(keys)?.waiters.values() ?? [])].flatMap((entry) => [
    String(entry.since * 1_000),
    entry.instanceId,
  ]);
  return {
    token: lease?.token ?? null,
    pttl: lease ? space.pttlOf(lease) : -2,
    fence: space.fence(keys),
    holder: lease?.holder ? `${lease.holder.since} ${lease.holder.instanceId}` : null,
    waiters,
  };
}
