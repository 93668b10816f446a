import { clockDrift } from '../util/clock';
import type { LockRedisKeys } from '../keys/lock-keys';
import type {
  AcquireAllReply,
  AcquireTry,
  FairAcquireReply,
  FairLockBackend,
  RenewableLease,
} from './lock-backend';
import { MemoryReadLeases } from '../kinds/read/memory-read';
import type { ReleasePubSub } from '../redis/release-pubsub';
import { DEFAULT_OPTIONS } from '../options/option-defaults';
import { heldKinds, type RawLockInfo } from './lock-info';
import { type EvictedLock } from './lock-eviction';
import { evictKinds, inspectKinds, type MemoryKinds } from './memory-admin';
import type { LockNamesPage } from './lock-scan';
import { MemoryKeyspace } from './memory-keyspace';
import { MemoryAcquireAll } from './memory-acquire-all';
import { MemoryFairQueue } from '../kinds/exclusive/memory-fair';
import { MemoryLeaderLeases } from '../kinds/leader/memory-leader';
import type { LeaderReads } from '../kinds/leader/leader-info';
import { MemoryExclusiveLeases } from '../kinds/exclusive/memory-exclusive';
import { renewByKind, twinLeases, type FairLeases, type KindTable } from '../kinds/kind-leases';
import { MemoryFairPermits } from '../kinds/semaphore/memory-fair-permits';
import { MemoryPermits } from '../kinds/semaphore/memory-permits';
import { MemoryPubSubHub } from './memory-pubsub';
import { MEMORY } from './store-capabilities';

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
 * MemoryReadLeases), semaphores (MemoryPermits; in fair mode MemoryFairPermits), the holder
 * record of each grant, share and permit (instance id, and since on `Date.now()`: epoch ms as on
 * Redis, fake timers included) with its waiters' ids for inspection, listing of every kind
 * (`scan`, its cursor an index in name order), a forced release of every kind, and pub/sub: a
 * release publishes the releasing token, a forced release '1' (a read lock's a wake-all, a
 * semaphore's one '1' per permit), a hand-off `grant:<token>:<fence>`, on the lock's
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
  readonly capabilities = MEMORY;
  private readonly keys: MemoryKeyspace;
  private readonly hub = new MemoryPubSubHub();
  private closed = false;
  private readonly instanceId: string;
  /** Semaphores: permit leases (`keys.kind.type === 'semaphore'`), as the permit scripts keep them. */
  private readonly permits: MemoryPermits;
  /** Read-write locks: the readers' shares and the writers waiting. */
  private readonly shared: MemoryReadLeases;
  /** Fair mode of a semaphore's permits (the queue of a lock is in the keyspace). */
  private readonly fairPermits: MemoryFairPermits;
  /** Each kind's twin, looked up by a lease's kind (see `lib/kinds/`). */
  private readonly leases: KindTable;
  /** Who leads a role (the leases themselves are in `leases`). */
  readonly leaders: LeaderReads;
  /** Multi-key locks: all or none. */
  private readonly allOrNone: MemoryAcquireAll;

  constructor(options: MemoryLockBackendOptions = {}) {
    this.instanceId = options.instanceId ?? DEFAULT_OPTIONS.instanceId;
    this.keys = new MemoryKeyspace(
      options.now ?? (() => performance.now()),
      options.fenceRetention ?? 60_000,
    );
    const publish = (channel: string, message: string) => this.hub.publish(channel, message);
    const id = this.instanceId;
    this.permits = new MemoryPermits(this.keys, publish, id);
    this.fairPermits = new MemoryFairPermits(this.keys, this.permits, publish, id);
    this.shared = new MemoryReadLeases(this.keys, this.hub, id);
    const command = <T>(body: () => T) => this.command(body);
    const exclusive = new MemoryExclusiveLeases(this.keys, this.shared, this.hub);
    const fair = new MemoryFairQueue(this.keys, this.hub, id);
    const leader = new MemoryLeaderLeases(exclusive, this.keys, this.hub);
    this.leaders = { inspect: (keys) => this.command(() => leader.inspect(keys)) };
    this.leases = {
      exclusive: twinLeases(command, exclusive, fair),
      read: twinLeases(command, this.shared),
      semaphore: twinLeases(command, this.permits, this.fairPermits),
      leader: twinLeases(command, leader, fair), // fair mode: the mutex's queue, on its names
    };
    this.allOrNone = new MemoryAcquireAll(this.keys);
  }

  acquire(keys: LockRedisKeys, token: string, ttl: number, how?: AcquireTry): Promise<number> {
    return this.leases[keys.kind.type].acquire(keys, token, ttl, how);
  }

  /** All or none, as the script does (see MemoryAcquireAll). */
  acquireAll(...args: Parameters<MemoryAcquireAll['acquire']>): Promise<AcquireAllReply> {
    return this.command(() => this.allOrNone.acquire(...args));
  }

  leaveWriters(keys: LockRedisKeys, id: string): Promise<void> {
    return this.command(() => this.shared.leaveWriters(keys, id));
  }

  extend(keys: LockRedisKeys, token: string, ms: number): Promise<boolean> {
    return this.leases[keys.kind.type].extend(keys, token, ms);
  }

  renewMany(leases: readonly RenewableLease[]): Promise<(boolean | undefined)[]> {
    return renewByKind(this.leases, leases);
  }

  release(keys: LockRedisKeys, token: string): Promise<boolean> {
    return this.leases[keys.kind.type].release(keys, token, (deleted) => deleted);
  }

  releaseAll(keys: readonly LockRedisKeys[], tokens: readonly string[]): Promise<boolean[]> {
    return this.leases[keys[0]!.kind.type].releaseAll!(keys, tokens, (deleted) => deleted);
  }

  fairAcquire(...args: Parameters<FairLeases['acquire']>): Promise<FairAcquireReply> {
    return this.fairOf(args[0]).acquire(...args);
  }

  fairRelease(keys: LockRedisKeys, token: string): Promise<boolean> {
    return this.fairOf(keys).release(keys, token);
  }

  /** The fair mode of the kind of `keys`; the engine never queues a kind without one (readers). */
  private fairOf(keys: LockRedisKeys): FairLeases {
    const fair = this.leases[keys.kind.type].fair;
    if (!fair) throw new Error(`no fair mode for ${keys.kind.type} leases`);
    return fair;
  }

  async forceRelease(keys: LockRedisKeys): Promise<boolean> {
    return (await this.evict(keys)) !== null;
  }

  /** Every holder of every kind on the key goes, as in the force-release script. */
  evict(keys: LockRedisKeys): Promise<EvictedLock | null> {
    return this.command(() => evictKinds(this.kinds, keys));
  }

  /** Every kind of lock on the key, as the inspect script reads them. */
  inspectRaw(keys: LockRedisKeys): Promise<RawLockInfo> {
    return this.command(() => inspectKinds(this.kinds, keys));
  }

  /** The cursor is the index of the next name, in name order. */
  scan(prefix: string, cursor: string | undefined, count: number): Promise<LockNamesPage> {
    return this.command(() => {
      const start = Number(cursor ?? 0);
      // One name per lock, whichever kind holds it (the inspection reads which).
      const held = new Set([
        ...this.keys.lockNames(),
        ...this.shared.readerNames(),
        ...this.permits.names(),
      ]);
      const all = [...held].filter((name) => name.startsWith(`${prefix}{`)).sort();
      const names = all.slice(start, start + count);
      const next = start + names.length;
      return next < all.length ? { names, cursor: String(next) } : { names };
    });
  }

  /** Held in any way, as `inspectRaw` reads it. */
  isLocked(keys: LockRedisKeys): Promise<boolean> {
    return this.command(() => heldKinds(inspectKinds(this.kinds, keys)).length > 0);
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
    if (keys.kind.type === 'semaphore') return this.fairPermits.queued(keys);
    return [...(this.keys.queue(keys)?.waiters.keys() ?? [])];
  }

  /** How many subscribers listen on `channel` now. */
  subscriberCount(channel: string): number {
    return this.hub.subscriberCount(channel);
  }

  private get kinds(): MemoryKinds {
    const { keys: space, shared, permits, fairPermits, hub } = this;
    return { space, shared, permits, fairPermits, publish: (c, m) => hub.publish(c, m) };
  }

  /** Runs `body` atomically now; its answer (or error) arrives as a reply does, asynchronously. */
  private command<T>(body: () => T): Promise<T> {
    if (this.closed) return Promise.reject(new Error('Connection is closed.'));
    return new Promise<T>((resolve) => resolve(body()));
  }
}
