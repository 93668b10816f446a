/**
 * What one lease grants. Every primitive is built from leases of one of these kinds, each with its
 * own random token, renewed by the same watchdog and released by compare-and-delete. The names are
 * the ones users read from `inspect()` (`LockKind`), in the code and the docs alike:
 * - `exclusive`: the key alone — a mutex, and the write side of a read-write lock;
 * - `read`: one reader's share of a read-write lock (many at once, never beside a writer);
 * - `semaphore`: one of `permits` places of a semaphore on the key;
 * - `leader`: a role's leadership (`LockService.lead`), an exclusive lease under names of its own.
 */
export type LeaseKind = ExclusiveLease | ReadLease | SemaphoreLease | LeaderLease;

export interface ExclusiveLease {
  readonly type: 'exclusive';
}

export interface ReadLease {
  readonly type: 'read';
}

export interface SemaphoreLease {
  readonly type: 'semaphore';
  /** How many holders the key admits at once; every holder of the key must name the same. */
  readonly permits: number;
}

export interface LeaderLease {
  readonly type: 'leader';
}

/** The kind of a role's leadership: its term is the lease's fence. */
export const LEADER: LeaderLease = Object.freeze({ type: 'leader' });

/** The kind of a plain lock (and of a read-write lock's writer). */
export const EXCLUSIVE: ExclusiveLease = Object.freeze({ type: 'exclusive' });

/** The kind of a read-write lock's reader. */
export const READ: ReadLease = Object.freeze({ type: 'read' });

/**
 * How the engine treats the leases of a kind: what it asks of a kind, looked up by `traitsOf`, so
 * the waiting, queueing and release paths never test a kind by name. A new kind adds its row.
 */
export interface KindTraits {
  /**
   * One holder at a time, so a wake-up a waiter did not use frees nothing for the next one; a kind
   * of several holders (permits, readers) passes the unused wake-up on.
   */
  readonly oneHolder: boolean;
  /**
   * A release message wakes every waiter on the key, not the longest-waiting one: a writer's end
   * admits all the readers at once.
   */
  readonly wakesAll: boolean;
  /** Fair mode queues its waiters in the store, and a release hands over to the first in line. */
  readonly queuesWhenFair: boolean;
  /**
   * A release frees a place the next local waiter can take, so the answer wakes it without
   * waiting for the message. A reader's release frees none while other readers stay (its script
   * publishes when the last one leaves).
   */
  readonly releaseFreesPlace: boolean;
  /** A waiting acquire enters the writers-waiting set, holding new readers back (writer priority). */
  readonly waitsAsWriter: boolean;
}

const KIND_TRAITS: Readonly<Record<LeaseKind['type'], KindTraits>> = Object.freeze({
  exclusive: {
    oneHolder: true,
    wakesAll: false,
    queuesWhenFair: true,
    releaseFreesPlace: true,
    waitsAsWriter: true,
  },
  read: {
    oneHolder: false,
    wakesAll: true,
    queuesWhenFair: false,
    releaseFreesPlace: false,
    waitsAsWriter: false,
  },
  semaphore: {
    oneHolder: false,
    wakesAll: false,
    queuesWhenFair: true,
    releaseFreesPlace: true,
    waitsAsWriter: false,
  },
  leader: {
    oneHolder: true,
    wakesAll: false,
    queuesWhenFair: true,
    releaseFreesPlace: true,
    waitsAsWriter: false,
  },
});

/** What the engine needs to know of `kind` (see `KindTraits`). */
export function traitsOf(kind: LeaseKind = EXCLUSIVE): KindTraits {
  return KIND_TRAITS[kind.type];
}

/** The limit a permit lease asks for, or undefined for any other kind of lease. */
export function permitsOf(kind: LeaseKind): number | undefined {
  return kind.type === 'semaphore' ? kind.permits : undefined;
}
