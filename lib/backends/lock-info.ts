import type { LockKind } from '../keys/lock-keys';

export type { LockKind } from '../keys/lock-keys';

/** Who holds a lock: written by the grant beside the lease, for inspection only. */
export interface LockHolderInfo {
  /** The holding process's `instanceId` option (default `<hostname>:<pid>`). */
  instanceId: string;
  /** When the lock was granted to it: epoch ms on Redis' clock. */
  since: number;
}

/** A waiter queued for a lock in fair mode. */
export interface LockWaiterInfo {
  /** The waiting process's `instanceId`; absent when a version without holder records queued it. */
  instanceId?: string;
  /** When it joined the queue: epoch ms on Redis' clock. */
  since: number;
}

/** One holder of a read lock's share or of a semaphore's permit. */
export interface LeaseHolderInfo extends LockHolderInfo {
  /** Ms left of its current lease (renewal pushes it back). */
  ttlMs: number;
}

/** A read lock's readers, as `inspect` finds them (`kind: 'read'`). */
export interface ReadersInfo {
  /** How many readers hold a share now. */
  count: number;
  /**
   * Who they are, the soonest lease end first: one entry per share whose grant wrote a record
   * (a process of an older version writes none, so there may be fewer than `count`).
   */
  holders: LeaseHolderInfo[];
  /** Writers waiting for the readers to leave (writer priority: new readers are refused). */
  writersWaiting: number;
}

/** A semaphore's permits, as `inspect` finds them (`kind: 'semaphore'`). */
export interface SemaphoreInfo {
  /** Its limit N, as its holders took it with `permits: N`. */
  permits: number;
  /** How many permits are held now (at most `permits`). */
  count: number;
  /** Who holds them, the soonest lease end first; as `ReadersInfo.holders`, maybe fewer. */
  holders: LeaseHolderInfo[];
  /** The semaphore's fence counter: the fence of the latest permit granted. */
  fence: number;
}

/**
 * What `LockService.inspect(key)` finds: a snapshot, stale as soon as it is read. One shape for
 * every kind of lock; `kind` says which fields apply:
 * - `'exclusive'` (a mutex, or a read-write lock's writer): `holder`, and in fair mode `waiters`;
 * - `'read'`: `readers`, and in fair mode the writers queued as `waiters`;
 * - `'semaphore'`: `semaphore`, and in fair mode `waiters` for a permit.
 * `ttlMs` and `fence` are present for every kind while held. Kinds on one key exclude each other
 * (they hold its one name), so one kind holds a key; a reading that found several would come as
 * the first of exclusive, read, semaphore with the others in `others`.
 */
export interface LockInfo {
  /** Whether anyone holds the lock now, in any way (`isLocked` answers the same). */
  held: boolean;
  /** What kind of lock holds the key. Present when held. */
  kind?: LockKind;
  /**
   * Ms left of the holder's current lease (renewal pushes it back); of a read lock or a
   * semaphore, the longest lease left among its holders. Present when held.
   */
  ttlMs?: number;
  /**
   * The holder's fence; of a read lock, the counter its readers' fences come from; of a
   * semaphore, its counter (as `semaphore.fence`). Present when held.
   */
  fence?: number;
  /**
   * Who holds an exclusive lock; absent when the grant wrote no record (a process of an older
   * version), and for the other kinds (see `readers.holders`, `semaphore.holders`).
   */
  holder?: LockHolderInfo;
  /** Fair mode: the queued waiters, first come first. Absent when nobody queues. */
  waiters?: LockWaiterInfo[];
  /** A read lock's readers. Present when `kind` is `'read'`. */
  readers?: ReadersInfo;
  /** A semaphore's permits. Present when `kind` is `'semaphore'`. */
  semaphore?: SemaphoreInfo;
  /**
   * `inspect`: every other kind of lock that holds the key too, each read as its own kind from the
   * same reading, in the order exclusive, read, semaphore (a forced release removes them all).
   * Absent when one kind (or none) holds the key, and in a listing, which lists each kind apart.
   */
  others?: LockInfo[];
}

/** One held lock of a listing. */
export interface ListedLock extends LockInfo {
  /** The lock key as the application names it (without the prefix). */
  key: string;
}

/** One page of `LockService.list()`. */
export interface LockListPage {
  locks: ListedLock[];
  /** Pass it to the next `list()` call; absent when the listing is complete. */
  cursor?: string;
}

/** Flat, as the scripts answer: ms left of each live holder's lease, then its record (or null). */
export type RawHolders = (number | string | null)[];

/** The inspect script's reply as the backends share it; the token never leaves the backends. */
export interface RawLockInfo {
  token: string | null;
  pttl: number;
  fence: number;
  holder: string | null;
  /** Flat: arrival (µs), instance id (or null), … */
  waiters: (string | null)[];
  /** A read lock's live readers (absent: a backend that serves none, Redlock). */
  readers?: RawHolders;
  /** The writers waiting for the readers, live entries only. */
  writersWaiting?: number;
  /** The semaphore on the key (absent: a backend that serves none, Redlock). */
  semaphore?: { limit: number; fence: number; permits: RawHolders; waiters: (string | null)[] };
}

/** Who holds a grant whose token carries it (see `newHolderToken`), else undefined. */
export function holderOfToken(token: string): LockHolderInfo | undefined {
  return parseHolder(/^[0-9a-f]+ (\d+ [\s\S]*)$/.exec(token)?.[1]);
}

/** A holder record `"<since> <instance id>"` read back; undefined when absent or malformed. */
export function parseHolder(record: string | null | undefined): LockHolderInfo | undefined {
  const match = /^(\d+) ([\s\S]*)$/.exec(record ?? '');
  return match ? { since: Number(match[1]), instanceId: match[2]! } : undefined;
}

/** The live holders of a flat raw list: how many, and those with a record. */
export function holdersOf(raw: RawHolders | undefined): {
  count: number;
  holders: LeaseHolderInfo[];
} {
  const holders: LeaseHolderInfo[] = [];
  let count = 0;
  for (let i = 0; i + 1 < (raw?.length ?? 0); i += 2) {
    count++;
    const holder = parseHolder(raw![i + 1] as string | null);
    if (holder) holders.push({ ...holder, ttlMs: Math.max(0, Number(raw![i])) });
  }
  return { count, holders };
}

/** The longest lease left among `holders`' flat list. */
function longestLease(raw: RawHolders): number {
  let longest = 0;
  for (let i = 0; i < raw.length; i += 2) longest = Math.max(longest, Number(raw[i]));
  return longest;
}

function waitersOf(flat: readonly (string | null)[]): LockWaiterInfo[] {
  const waiters: LockWaiterInfo[] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) {
    const waiter: LockWaiterInfo = { since: Math.floor(Number(flat[i]) / 1_000) };
    const instanceId = flat[i + 1];
    if (instanceId) waiter.instanceId = instanceId;
    waiters.push(waiter);
  }
  return waiters;
}

/** Which kinds of lock `raw` finds held, in the order inspection reports them. */
export function heldKinds(raw: RawLockInfo): LockKind[] {
  const kinds: LockKind[] = [];
  if (raw.token !== null) kinds.push('exclusive');
  if ((raw.readers?.length ?? 0) > 0) kinds.push('read');
  if ((raw.semaphore?.permits.length ?? 0) > 0) kinds.push('semaphore');
  return kinds;
}

/**
 * The public view of a raw reply: no token, and only what applies — for the kind `only` (a
 * listing names the lock it found), else for the first kind held, with every other kind held in
 * `others`.
 */
export function lockInfoOf(raw: RawLockInfo, only?: LockKind): LockInfo {
  const held = heldKinds(raw);
  if (only === undefined && held.length > 1) {
    return { ...lockInfoOf(raw, held[0]), others: held.slice(1).map((k) => lockInfoOf(raw, k)) };
  }
  const kind = only === undefined ? held[0] : held.includes(only) ? only : undefined;
  const info: LockInfo = { held: kind !== undefined };
  let waiters = waitersOf(raw.waiters);
  if (kind === 'exclusive') {
    info.kind = kind;
    info.ttlMs = Math.max(0, raw.pttl);
    info.fence = raw.fence;
    const holder = parseHolder(raw.holder);
    if (holder) info.holder = holder;
  } else if (kind === 'read') {
    const readers = raw.readers!;
    Object.assign(info, { kind, ttlMs: longestLease(readers), fence: raw.fence });
    info.readers = { ...holdersOf(readers), writersWaiting: raw.writersWaiting ?? 0 };
  } else if (kind === 'semaphore') {
    const { limit, fence, permits } = raw.semaphore!;
    Object.assign(info, { kind, ttlMs: longestLease(permits), fence });
    info.semaphore = { permits: limit, ...holdersOf(permits), fence };
    waiters = waitersOf(raw.semaphore!.waiters);
  }
  if (waiters.length > 0) info.waiters = waiters;
  return info;
}
