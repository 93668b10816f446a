import type { LockLostError } from '../errors/errors';
import type { LockRedisKeys } from '../keys/lock-keys';
import type { LockHandle } from './lock-handle';

/*
 * Generic in the lock type so that this file need not import HeldLock, which imports it: the
 * engine implements LockOperations<HeldLock>.
 */

/** The engine operations a held lock needs. */
export interface LockOperations<Lock> {
  extendLease(lock: Lock, ms: number): Promise<boolean>;
  /**
   * Releases `lock`, resolving what `settle` makes of whether it was still ours (mapped in the
   * step the release is answered in, no layer of its own).
   */
  releaseLease<R>(lock: Lock, settle: (deleted: boolean) => R): Promise<R>;
  /**
   * Runs `release`, which releases the locks of a multi-key set: their releases go to the store as
   * one command where it can send one.
   */
  releaseTogether<T>(release: () => T): T;
  /** Stops renewing and forgets the lock (released or lost). */
  untrack(lock: Lock): void;
  /** Safety margin (ms) subtracted from a lease on the local clock (clock drift, latency). */
  drift(ttl: number): number;
  /**
   * Reports a loss (event + log): once per lost lock, and once per re-entrant hold that reached
   * its own `maxHold` (`handle`, the one its work was given, then goes to the listeners).
   */
  reportLost(lock: Lock, error: LockLostError, handle?: LockHandle): void;
  /** Reports a release of a lock that was still ours (event + telemetry). */
  reportReleased(lock: Lock): void;
  /** Reports a release that failed (Redis out of reach) where nobody awaits it: logged. */
  reportReleaseFailed(lock: Lock, error: unknown): void;
  /** The lease or its deadline changed (`extend`): the watchdog must look at it again. */
  rescheduled(lock: Lock): void;
}

/** What a `HeldLock` is made of: the grant the engine received, and the engine itself. */
export interface HeldLockOptions<Lock> {
  /** The engine that renews, extends and releases the lock, and hears of its loss. */
  operations: LockOperations<Lock>;
  /** The lock key as the caller named it (without the prefix). */
  key: string;
  /** The Redis keys of that lock (its prefix applied). */
  redisKeys: LockRedisKeys;
  /** The owner token the lock was granted to: only it can extend or release the lock. */
  token: string;
  /** The fencing token Redis gave with the grant. */
  fence: number;
  /** The lease length (ms) the lock was granted with, counted from `startedAt`. */
  lease: number;
  /** Monotonic time at which the granting command was sent: the lease started no earlier. */
  startedAt: number;
  /** Whose lock it is: re-entrancy tells locks of different LockService instances apart by it. */
  owner: object;
}
