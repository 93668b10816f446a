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

/** What `LockService.inspect(key)` finds: a snapshot, stale as soon as it is read. */
export interface LockInfo {
  /** Whether anyone holds the lock now. */
  held: boolean;
  /** Ms left of the holder's current lease (renewal pushes it back). Present when held. */
  ttlMs?: number;
  /** The holder's fence. Present when held. */
  fence?: number;
  /** Who holds it; absent when the grant wrote no record (a process of an older version). */
  holder?: LockHolderInfo;
  /** Fair mode: the queued waiters, first come first. Absent when nobody queues. */
  waiters?: LockWaiterInfo[];
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

/** What `LockService.evict(key)` removed. */
export interface EvictedLock {
  /** The fence of the removed holder. */
  fence: number;
  /** Who held it; absent when its grant wrote no record (an older version). */
  holder?: LockHolderInfo;
}

/** The inspect script's reply as the backends share it; the token never leaves the backends. */
export interface RawLockInfo {
  token: string | null;
  pttl: number;
  fence: number;
  holder: string | null;
  /** Flat: arrival (µs), instance id (or null), … */
  waiters: (string | null)[];
}

/** A holder record `"<since> <instance id>"` read back; undefined when absent or malformed. */
export function parseHolder(record: string | null | undefined): LockHolderInfo | undefined {
  const match = /^(\d+) ([\s\S]*)$/.exec(record ?? '');
  return match ? { since: Number(match[1]), instanceId: match[2]! } : undefined;
}

/** The public view of a raw reply: no token, and only what applies. */
export function lockInfoOf(raw: RawLockInfo): LockInfo {
  const info: LockInfo = { held: raw.token !== null };
  if (info.held) {
    info.ttlMs = Math.max(0, raw.pttl);
    info.fence = raw.fence;
    const holder = parseHolder(raw.holder);
    if (holder) info.holder = holder;
  }
  const waiters: LockWaiterInfo[] = [];
  for (let i = 0; i + 1 < raw.waiters.length; i += 2) {
    const waiter: LockWaiterInfo = { since: Math.floor(Number(raw.waiters[i]) / 1_000) };
    const instanceId = raw.waiters[i + 1];
    if (instanceId) waiter.instanceId = instanceId;
    waiters.push(waiter);
  }
  if (waiters.length > 0) info.waiters = waiters;
  return info;
}
