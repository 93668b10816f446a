import type { LeaderReads } from '../kinds/leader/leader-info';
import type { LockRedisKeys } from '../keys/lock-keys';
import type { ReleasePubSub } from '../redis/release-pubsub';
import type { RawLockInfo } from './lock-info';
import type { EvictedLock } from './lock-eviction';
import type { LockNamesPage, PageBound } from './lock-scan';
import type { StoreCapabilities } from './store-capabilities';

/** What one fair-mode try found. */
export type FairAcquireReply =
  /**
   * Granted now, with the full ttl counted from when the try ran. `plain`: granted as default
   * mode grants (no queue, nothing marked, no holder record), which a store may release by a
   * cheaper path while it stays so (see `fairRelease`).
   */
  | { granted: number; plain?: true }
  /** Already `token`'s (a release handed it over): its fence, and the lease left (ms). */
  | { ours: number; pttl: number }
  /** Busy: ms until another try is worth it, and the fence counter as it stood. */
  | { retryAfterMs: number; fence: number };

/** What one all-or-nothing try for several locks found (`acquireAll`). */
export type AcquireAllReply =
  /** All granted: one fence per lock, in the order asked. */
  | { fences: number[] }
  /** None granted: the index of the first busy lock, and its holder's lease left (ms). */
  | { busy: number; retryAfterMs: number };

/** A held lease as the watchdog renews it. */
export interface RenewableLease {
  readonly redisKeys: LockRedisKeys;
  readonly token: string;
  /** The lease length (ms) to renew it to. */
  readonly lease: number;
  /** Its fence: Redlock raises a repaired node's counter to it. */
  readonly fence: number;
}

/** What a try adds for a read-write lock's writer (absent: a plain try, or one that will not wait). */
export interface AcquireTry {
  /**
   * A writer that will wait, with writer priority: its id (one per acquire call) in the writers'
   * waiting set while readers hold the key, and how long (ms) its entry lives without a refresh.
   */
  readonly waitingWriter?: {
    readonly id: string;
    readonly entryMs: number;
    /** Called when a try put the writer in the waiting set (it must leave it if it gives up). */
    entered(): void;
  };
}

/**
 * Where locks live: one Redis (single node, Sentinel-managed, or Cluster) or a Redlock quorum of
 * independent primaries. The engine above it (waiting, watchdog, handles) is the same for all.
 */
export interface LockBackend {
  /** The kinds and strategies it serves: what the engine and the service check options against. */
  readonly capabilities: StoreCapabilities;
  /** Tries once. Resolves the new fence (> 0) when granted, else -(holder's PTTL in ms). */
  acquire(keys: LockRedisKeys, token: string, ttl: number): Promise<number>;
  /**
   * Multi-key locks: tries once for all of `keys` in one atomic step, `tokens[i]` for `keys[i]`
   * — all granted, or none. Used where `capabilities.acquireAll` allows it; absent (Redlock):
   * the engine takes the keys one by one in order.
   */
  acquireAll?(
    keys: readonly LockRedisKeys[],
    tokens: readonly string[],
    ttl: number,
  ): Promise<AcquireAllReply>;
  /**
   * Tries once, for the kind of lease `keys.kind` names (a reader's share: `'read'`). Resolves
   * the fence (> 0) when granted — a reader's is the counter as it stands — else -(ms until
   * another try is worth it: the holder's PTTL, or the readers').
   */
  acquire(keys: LockRedisKeys, token: string, ttl: number, how?: AcquireTry): Promise<number>;
  /**
   * A waiting writer gave up: its entry leaves the writers' waiting set, and the readers it held
   * back are woken. Absent where read-write locks are not served (Redlock).
   */
  leaveWriters?(keys: LockRedisKeys, id: string): Promise<void>;
  /** Who leads a role, read in one step. Absent where leadership is not served (Redlock). */
  readonly leaders?: LeaderReads;
  /** Compare-and-pexpire. Resolves whether `token` still owned the lock. */
  extend(keys: LockRedisKeys, token: string, ms: number): Promise<boolean>;
  /**
   * Compare-and-pexpire of many leases, batched into as few commands as the topology allows.
   * Resolves one answer per lease: whether it is still ours, or undefined when that could not be
   * told (Redlock without a clear quorum) and the renewal should be retried.
   */
  renewMany(leases: readonly RenewableLease[]): Promise<(boolean | undefined)[]>;
  /**
   * Which server serves `keys` now, where several do (a Cluster: the node of their slot). The
   * watchdog renews each server's locks as a batch of their own, so a server out of reach holds
   * up only the renewals of its own locks. Absent: one batch for all.
   */
  shardOf?(keys: LockRedisKeys): string;
  /** Compare-and-delete + wake waiters. Resolves whether `token` still owned the lock. */
  release(keys: LockRedisKeys, token: string): Promise<boolean>;
  /**
   * Multi-key locks: `release` of each of `keys` (`tokens[i]` for `keys[i]`) in one command, one
   * answer per key, in order — or undefined, nothing sent, where the keys do not allow one command
   * (a Cluster's keys on several slots). Absent (Redlock), or undefined: the engine releases each
   * key by itself, each retried and answered on its own.
   */
  releaseAll?(
    keys: readonly LockRedisKeys[],
    tokens: readonly string[],
  ): Promise<boolean[]> | undefined;
  /**
   * The operator's commands below act on every kind of lock on the user key `keys` names (of any
   * kind): its exclusive lock, its readers, its semaphore — one hash tag, one atomic step.
   * Removes every holder of every kind; resolves whether there was any.
   */
  forceRelease(keys: LockRedisKeys): Promise<boolean>;
  /** Whether any kind of lock on the key is held (what `inspectRaw` reads as held). */
  isLocked(keys: LockRedisKeys): Promise<boolean>;
  /** Removes every holder, as `forceRelease`; resolves what it removed, or null if free. */
  evict(keys: LockRedisKeys): Promise<EvictedLock | null>;
  /**
   * Reads every kind of lock on the key, their holder records and fair queues, in one atomic step;
   * writes nothing. Redlock reads exclusive locks only (it serves no other kind).
   */
  inspectRaw(keys: LockRedisKeys): Promise<RawLockInfo>;
  /** One page of the lock names of every kind under `prefix` (see `scanLockNames`). */
  scan(prefix: string, cursor: string | undefined, count: number): Promise<LockNamesPage>;
  /**
   * A key under `prefix` in an earlier version's layout that this one cannot exclude (see
   * `findLegacyShareSet`), or undefined, each page of the search bounded by `bound`. Absent: the
   * store never had such keys.
   */
  findLegacyKey?(prefix: string, bound: PageBound): Promise<string | undefined>;
  createPubSub(): ReleasePubSub;
  /** Safety margin (ms) the holder subtracts from a lease of `ttl` on its local clock. */
  drift(ttl: number): number;
  /** Closes the connections this backend opened (never a client the user passed in). */
  close(): Promise<void>;
}

/**
 * A backend that also serves fair mode, where waiters queue in Redis and a release hands the lock
 * to the first in line: one Redis or a Cluster, not Redlock (no single server to hold the queue).
 */
export interface FairLockBackend extends LockBackend {
  /**
   * Fair mode (one Redis or a Cluster; not Redlock): tries once, as the waiter `token` (one per
   * acquire call), joining or staying in the queue when `queue` is set — for the lock, or for one
   * of a semaphore's permits when `keys.kind` is a permit lease (`SemaphoreLimitConflictError`
   * when the holders named another limit; a permit already `token`'s is granted anew, never
   * answered `ours`). `wanted` turns false once the call gave up: a try that takes more than one
   * command sends no further one then.
   */
  fairAcquire(
    keys: LockRedisKeys,
    token: string,
    ttl: number,
    queue: boolean,
    waiterTtl: number,
    wanted?: () => boolean,
  ): Promise<FairAcquireReply>;
  /**
   * Fair mode: leaves the queue, and if `token` holds the lock, hands it to the first live waiter
   * (or frees it); for a semaphore, hands every free permit to the first live waiters. Resolves
   * whether `token` held it. `plain`: the lease was granted plain (`FairAcquireReply`).
   */
  fairRelease(keys: LockRedisKeys, token: string, plain?: boolean): Promise<boolean>;
}

/** Whether `backend` serves fair mode: it says so, and has the fair-mode commands. */
export function servesFairMode(backend: LockBackend): backend is FairLockBackend {
  const fair = backend as Partial<FairLockBackend>;
  return (
    backend.capabilities.fair &&
    typeof fair.fairAcquire === 'function' &&
    typeof fair.fairRelease === 'function'
  );
}
