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

/** The limit a permit lease asks for, or undefined for any other kind of lease. */
export function permitsOf(kind: LeaseKind): number | undefined {
  return kind.type === 'semaphore' ? kind.permits : undefined;
}
