/**
 * What one lease grants. Every primitive is built from leases of one of these kinds, each with its
 * own random token, renewed by the same watchdog and released by compare-and-delete:
 * - `exclusive`: the key alone — a mutex, and the write side of a read-write lock;
 * - `shared`: one reader's share of a read-write lock (many at once, never beside a writer);
 * - `permit`: one of `permits` places of a semaphore on the key.
 */
export type LeaseKind = ExclusiveLease | SharedLease | PermitLease;

export interface ExclusiveLease {
  readonly type: 'exclusive';
}

export interface SharedLease {
  readonly type: 'shared';
}

export interface PermitLease {
  readonly type: 'permit';
  /** How many holders the key admits at once; every holder of the key must name the same. */
  readonly permits: number;
}

/** The kind of a plain lock (and of a read-write lock's writer). */
export const EXCLUSIVE: ExclusiveLease = Object.freeze({ type: 'exclusive' });

/** The kind of a read-write lock's reader. */
export const SHARED: SharedLease = Object.freeze({ type: 'shared' });

/** The limit a permit lease asks for, or undefined for any other kind of lease. */
export function permitsOf(kind: LeaseKind): number | undefined {
  return kind.type === 'permit' ? kind.permits : undefined;
}
