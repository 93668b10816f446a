import type { LockKind } from '../keys/lock-keys';
import {
  holdersOf,
  parseHolder,
  type LeaseHolderInfo,
  type LockHolderInfo,
  type RawHolders,
} from './lock-info';

/**
 * One kind of lock a forced release removed. `H` is `LockHolderInfo` for the exclusive lock (its
 * one holder) and `LeaseHolderInfo` for readers and permits (with the lease each had left).
 */
export interface EvictedKind<H extends LockHolderInfo = LeaseHolderInfo> {
  /** Its fence: the holder's (exclusive), the readers' counter, or the semaphore's counter. */
  fence: number;
  /** How many holders were removed: 1 for the exclusive lock, else the shares or permits. */
  count: number;
  /**
   * Who they were, from their holder records: a holder whose grant wrote none (a process of an
   * older version) is counted in `count` but not listed, so there may be fewer.
   */
  holders: H[];
}

/** Every kind of lock a forced release removed from one key; a kind that was not held is absent. */
export interface EvictedKinds {
  /** The mutex, or a read-write lock's writer. */
  exclusive?: EvictedKind<LockHolderInfo>;
  /** A read lock's readers. */
  read?: EvictedKind;
  /** A semaphore's permits. */
  semaphore?: EvictedKind;
}

/**
 * What `LockService.evict(key)` removed. A forced release removes every holder of every kind named
 * by the key (one kind holds a key: kinds on one key exclude each other): `removed` reports it. The top-level fields report the first of them, as `inspect` would have read the key (the
 * first of exclusive, read, semaphore that was held).
 */
export interface EvictedLock {
  /** The first kind removed (as `inspect` reads the key); `removed` has every kind. */
  kind: LockKind;
  /** Its fence: the removed holder's; of readers, their counter; of a semaphore, its counter. */
  fence: number;
  /** How many holders of `kind` were removed (1 for an exclusive lock), records or not. */
  count: number;
  /** Who held an exclusive lock; absent when its grant wrote no record (an older version). */
  holder?: LockHolderInfo;
  /** The readers or permit holders removed (`kind` `'read'` or `'semaphore'`), with records. */
  holders?: LeaseHolderInfo[];
  /** Every kind removed from the key, `kind` included. */
  removed: EvictedKinds;
}

/** What the force-release script removed, as the backends share it. */
export interface RawEviction {
  /** Whether an exclusive lock was deleted. */
  deleted: boolean;
  /** The key's fence counter: the deleted lock's fence, the removed readers' counter. */
  fence: number;
  /** The deleted lock's holder record, `"<since> <instance id>"`, or null (none, or no lock). */
  holder: string | null;
  /** The live readers removed, flat: ms left of each share, then its record (or null). */
  readers: RawHolders;
  /** The live permits removed, flat as `readers`. */
  permits: RawHolders;
  /** The semaphore's fence counter (0 when it never granted a permit). */
  permitFence: number;
}

/** What a forced release removed: every kind, the first at the top; null when nothing was. */
export function evictedOf(raw: RawEviction): EvictedLock | null {
  const removed: EvictedKinds = {};
  if (raw.deleted) {
    const holder = parseHolder(raw.holder);
    removed.exclusive = { fence: raw.fence, count: 1, holders: holder ? [holder] : [] };
  }
  if (raw.readers.length > 0) removed.read = { fence: raw.fence, ...holdersOf(raw.readers) };
  if (raw.permits.length > 0) {
    removed.semaphore = { fence: raw.permitFence, ...holdersOf(raw.permits) };
  }
  if (removed.exclusive) {
    const { fence, count, holders } = removed.exclusive;
    const [holder] = holders;
    return { kind: 'exclusive', fence, count, ...(holder && { holder }), removed };
  }
  const kind = removed.read ? 'read' : removed.semaphore ? 'semaphore' : undefined;
  if (kind === undefined) return null;
  const { fence, count, holders } = removed[kind]!;
  return { kind, fence, count, holders, removed };
}
