import { clockDrift } from '../util/clock';
import type { LockRedisKeys } from '../keys/lock-keys';
import type {
  AcquireAllReply,
  AcquireTry,
  FairAcquireReply,
  FairLockBackend,
  RenewableLease,
} from './lock-backend';
import { MemorySharedLeases } from './memory-shared';
import type { ReleasePubSub } from '../redis/release-pubsub';
import { DEFAULT_OPTIONS } from '../options/option-defaults';
import type { EvictedLock, RawLockInfo } from './lock-info';
import type { LockNamesPage } from './lock-scan';
import { MemoryKeyspace, rawInfoOf } from './memory-keyspace';
import { MemoryPermits } from './memory-permits';
import { MemoryPubSubHub } from './memory-pubsub';

/** Options of a {@link MemoryLockBackend}. */
export interface MemoryLockBackendOptions {
  /**
   * Milliseconds now, never stepping back: the server's clock, which every expiry is counted on.
   * Default: `performance.now()`, read at each call — so Jest's fake timers, which replace the
   * global `performance`, drive expiry with `jest.advanceTimersByTime()`.
   */
  now?: () => number;
  /** How long (ms) a fence counter outlives its lock's lease, as the option `fenceRetention`. */
  fenceRetention?: number;
  /** Written into the holder record of each grant, as the option `instanceId`. */
  instanceId?: string;
}

/**
 * Locks in this process's memory, for tests: the {@link LockBackend} contract of one Redis, with
 * the same replies and the same release messages as the Lua scripts the real backend runs.
 *
 * What it models: a lease per lock (token + expiry), compare-and-pexpire renewal and extension,
 * compare-and-delete release, the fence counter (counting up while it lives, outliving each lease
 * by `fenceRetention`, and restarting from the clock in µs once it lapsed), the busy reply
 * -(holder's PTTL), the all-or-nothing grant of several locks (`acquireAll`), fair mode's queue
 * (waiter entries that lapse after `waiterTtl`, a free lock reserved for the head of the queue,
 * hand-off on release), read-write locks (readers' shares, writers waiting: see
 * MemorySharedLeases), semaphores (MemoryPermits), the holder record of each grant
 * (instance id, and since on `Date.now()`: epoch ms as on Redis, fake timers included) with its
 * waiters' ids for inspection, listing (`scan`, its cursor an index in name order), and pub/sub: a release publishes the
 * releasing token, a forced release '1', a hand-off `grant:<token>:<fence>`, on the lock's
 * channel, to the subscribers of `createPubSub()`. Expiry follows Redis: a key lives through the
 * millisecond in which its PTTL reaches 0, and is gone after it. Each command is atomic: it runs
 * when called, and its reply arrives asynchronously.
 *
 * What it does not model: more than one node (no replication, failover, Cluster slots or Redlock
 * quorum), a network (no latency, lost replies, re-sent commands or connection errors), memory
 * limits, persistence, or `keyPrefix`. A lease must be a whole number of ms > 0, as Redis demands.
 * Nothing happens at import, and it needs no Redis.
 */
export class MemoryLockBackend implements FairLockBackend {
  private readonly keys: MemoryKeyspace;
  private readonly hub = new MemoryPubSubHub();
  private closed = false;
  private readonly instanceId: string;
  /** Semaphores: permit leases (`keys.kind.type === 'permit'`), as the permit scripts keep them. */
  private readonly permits: MemoryPermits;
  /** Read-write locks: the readers' shares and the writers waiting. */
  private readonly shared: MemorySharedLeases;

  constructor(options: MemoryLockBackendOptions = {}) {
    this.instanceId = options.instanceId ?? DEFAULT_OPTIONS.instanceId;
    this.keys = new MemoryKeyspace(
      options.now ?? (() => performance.now()),
      options.fenceRetention ?? 60_000,
    );
    this.permits = new MemoryPermits(this.keys, (channel, message) =>
      this.hub.publish(channel, message),
    );
    this.shared = new MemorySharedLeases(this.keys, this.hub);
  }

  acquire(keys: LockRedisKeys, token: string, ttl: number, how?: AcquireTry): Promise<number> {
    return this.command(() => {
      if (keys.kind.type === 'permit') return this.permits.acquire(keys, token, ttl);
      if (keys.kind.type === 'shared') return this.shared.acquire(keys, token, ttl);
      const readersUntil = this.shared.readersUntil(keys);
      if (readersUntil !== undefined) {
        return this.shared.refused(keys, readersUntil - this.keys.now(), how, true);
      }
      const holder = this.keys.lease(keys);
      if (!holder) {
        this.keys.setLease(keys, token, ttl, this.instanceId);
        this.shared.granted(keys, how);
        return this.keys.nextFence(keys, ttl);
      }
      // Our own grant, asked again: the fence it got (the counter cannot have moved since).
      if (holder.token === token) return this.keys.fence(keys);
      return this.shared.refused(keys, this.keys.pttlOf(holder), how, false);
    });
  }

  /**
   * All or none, as the script does: the first busy lock — held by another token, or by live
   * readers — and the ms until it may free mean nothing written.
   */
  acquireAll(
    keys: readonly LockRedisKeys[],
    tokens: readonly string[],
    ttl: number,
  ): Promise<AcquireAllReply> {
    return this.command((): AcquireAllReply => {
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
        this.keys.setLease(k, tokens[i]!, ttl, this.instanceId);
        return this.keys.nextFence(k, ttl);
      });
      return { fences };
    });
  }

  /** One server: any keys. */
  canAcquireAll(): boolean {
    return true;
  }

  leaveWriters(keys: LockRedisKeys, id: string): Promise<void> {
    return this.command(() => this.shared.leaveWriters(keys, id));
  }

  extend(keys: LockRedisKeys, token: string, ms: number): Promise<boolean> {
    return this.command(() => this.extendNow(keys, token, ms));
  }

  renewMany(leases: readonly RenewableLease[]): Promise<(boolean | undefined)[]> {
    return this.command(() =>
      leases.map((l) => this.extendNow(l.redisKeys, l.token, Math.ceil(l.lease))),
    );
  }

  release(keys: LockRedisKeys, token: string): Promise<boolean> {
    return this.command(() => {
      if (keys.kind.type === 'permit') return this.permits.release(keys, token);
      if (keys.kind.type === 'shared') return this.shared.release(keys, token);
      if (this.keys.lease(keys)?.token !== token) return false;
      this.keys.deleteLease(keys);
      this.hub.publish(keys.channel, token);
      return true;
    });
  }

  fairAcquire(
    keys: LockRedisKeys,
    token: string,
    ttl: number,
    queue: boolean,
    waiterTtl: number,
  ): Promise<FairAcquireReply> {
    return this.command((): FairAcquireReply => {
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
      // A read-write lock's readers hold it: the head waits for the last one to leave.
      const readersUntil = this.shared.readersUntil(keys);
      if (!holder && readersUntil === undefined && (head === undefined || head === token)) {
        this.keys.setLease(keys, token, ttl, this.instanceId);
        waiting?.waiters.delete(token);
        this.keys.dropQueueIfEmpty(keys);
        return { granted: this.keys.nextFence(keys, ttl) };
      }
      // Held: until its lease ends; free but reserved for the head: until the head's entry lapses.
      const retry = holder
        ? this.keys.pttlOf(holder)
        : (readersUntil ?? headEntry?.expiresAt ?? now) - now;
      if (queue) this.keys.enqueue(keys, token, ttl, waiterTtl, this.instanceId);
      this.keys.dropQueueIfEmpty(keys);
      return { retryAfterMs: Math.max(0, retry), fence: this.keys.fence(keys) };
    });
  }

  fairRelease(keys: LockRedisKeys, token: string): Promise<boolean> {
    return this.command(() => {
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
      const now = this.keys.now();
      for (const [head, entry] of waiting?.waiters ?? []) {
        waiting?.waiters.delete(head);
        if (entry.expiresAt <= now) continue; // lapsed: passed over
        // No longer than the entry would have lived: a waiter that died since its last refresh
        // holds the lock up for one entry lifetime at most.
        const handoff = Math.max(1, Math.floor(Math.min(entry.lease, entry.expiresAt - now)));
        this.keys.setLease(keys, head, handoff, entry.instanceId);
        const fence = this.keys.nextFence(keys, handoff);
        this.keys.dropQueueIfEmpty(keys);
        this.hub.publish(keys.channel, `grant:${head}:${fence}`);
        return true;
      }
      this.keys.dropQueueIfEmpty(keys);
      this.hub.publish(keys.channel, token);
      return true;
    });
  }

  async forceRelease(keys: LockRedisKeys): Promise<boolean> {
    return (await this.evict(keys)) !== null;
  }

  evict(keys: LockRedisKeys): Promise<EvictedLock | null> {
    return this.command(() => {
      if (keys.kind.type === 'permit') return this.permits.evict(keys, true);
      const lease = this.keys.lease(keys);
      if (!lease) return null;
      this.keys.deleteLease(keys);
      this.hub.publish(keys.channel, '1');
      const fence = this.keys.fence(keys);
      return lease.holder ? { fence, holder: lease.holder } : { fence };
    });
  }

  inspectRaw(keys: LockRedisKeys): Promise<RawLockInfo> {
    return this.command(() =>
      keys.kind.type === 'permit' ? this.permits.inspect(keys) : rawInfoOf(this.keys, keys),
    );
  }

  /** The cursor is the index of the next name, in name order. */
  scan(prefix: string, cursor: string | undefined, count: number): Promise<LockNamesPage> {
    return this.command(() => {
      const start = Number(cursor ?? 0);
      const all = this.keys.lockNames().filter((name) => name.startsWith(`${prefix}{`));
      const names = all.slice(start, start + count);
      const next = start + names.length;
      return next < all.length ? { names, cursor: String(next) } : { names };
    });
  }

  isLocked(keys: LockRedisKeys): Promise<boolean> {
    return this.command(() =>
      keys.kind.type === 'permit'
        ? this.permits.evict(keys, false) !== null
        : this.keys.lease(keys) !== undefined,
    );
  }

  createPubSub(): ReleasePubSub {
    return this.hub.connect();
  }

  drift(ttl: number): number {
    return clockDrift(ttl);
  }

  /** Refuses every later command, as a closed connection would. */
  close(): Promise<void> {
    this.closed = true;
    return Promise.resolve();
  }

  /** The token holding the lock now, if any (what `GET <lock>` would answer). */
  holder(keys: LockRedisKeys): string | undefined {
    return this.keys.lease(keys)?.token;
  }

  /** The lock's PTTL as Redis answers it: ms left, or -2 when it is not held. */
  pttl(keys: LockRedisKeys): number {
    const lease = this.keys.lease(keys);
    return lease ? this.keys.pttlOf(lease) : -2;
  }

  /** Fair mode: the queued waiters' tokens, first come first. */
  queued(keys: LockRedisKeys): string[] {
    return [...(this.keys.queue(keys)?.waiters.keys() ?? [])];
  }

  /** How many subscribers listen on `channel` now. */
  subscriberCount(channel: string): number {
    return this.hub.subscriberCount(channel);
  }

  private extendNow(keys: LockRedisKeys, token: string, ms: number): boolean {
    if (keys.kind.type === 'permit') return this.permits.extend(keys, token, ms);
    if (keys.kind.type === 'shared') return this.shared.extend(keys, token, ms);
    return this.keys.pexpireIfOurs(keys, token, ms);
  }

  /** Runs `body` atomically now; its answer (or error) arrives as a reply does, asynchronously. */
  private command<T>(body: () => T): Promise<T> {
    if (this.closed) return Promise.reject(new Error('Connection is closed.'));
    return new Promise<T>((resolve) => resolve(body()));
  }
}
