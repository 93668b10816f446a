import type { LockHandle } from '../engine/lock-handle';
import type { LockLostError } from '../errors/errors';
import type { LeaseKind } from '../keys/lease-kind';

/**
 * A lock as holds see it: what `Hold` and `ScopedLock` read and call. The engine's `HeldLock` is
 * one; a handle from a test double of `LockService`, seen through its public `LockHandle` only,
 * is another (`HandleLease`).
 */
export interface HeldLease {
  readonly key: string;
  readonly token: string;
  readonly fence: number;
  readonly validUntil: number;
  readonly isHeld: boolean;
  readonly signal: AbortSignal;
  /** Whose lock it is (an engine, or a double's adapter): re-entrancy joins only its own. */
  readonly owner: object;
  /**
   * The name a call chain's frame keeps its hold under (a read-write lock's reader and writer
   * share it), and what the lease grants (absent: the key alone).
   */
  readonly redisKeys: { readonly lock: string; readonly kind?: LeaseKind };
  /** Several keys held as one: every name the frame keeps the hold under (else `redisKeys`). */
  readonly lockNames?: readonly string[];
  /** Several keys held as one: the keys, and each key's fence (else `key` and `fence`). */
  readonly keys?: readonly string[];
  readonly fences?: Readonly<Record<string, number>>;
  /** The loss, if the lock was lost. */
  readonly lost: LockLostError | undefined;
  /** Declares the lock lost if its deadline has passed; true when it is lost. */
  expireIfDue(): boolean;
  /** One re-entrant hold reached its own `maxHold`: reports it as a loss to its work. */
  reportHoldLost(error: LockLostError, handle: LockHandle): void;
  /** `minHold` of a re-entrant call: a release before `at` (monotonic) keeps the key until then. */
  keepAtLeastUntil?(at: number): void;
  extend(ms?: number): Promise<void>;
  release(): Promise<boolean>;
}
