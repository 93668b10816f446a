import type { LeaseKind } from '../keys/lease-kind';
import type { LockRedisKeys } from '../keys/lock-keys';
import type { ResolvedRedisLockOptions } from '../options/redis-lock-options';
import type { ConnectionWatch } from '../redis/connection-watch';
import type { Bounded } from '../util/command-deadlines';
import type { AcquireRequest } from './acquire-request';
import type { HeldLock } from './held-lock';
import type { LockOperations } from './lock-operations';
import type { ReleaseNotifier } from './release-notifier';

/** What a lock's watch needs of its request: whether it renews, and its hold bounds. */
export type LockBounds = Pick<AcquireRequest, 'renew' | 'maxHold' | 'minHold'>;

/** What an acquire call uses of the engine it runs in. */
export interface AcquireContext {
  readonly options: ResolvedRedisLockOptions;
  readonly connections: ConnectionWatch;
  readonly notifier: ReleaseNotifier;
  /** The engine: a lock it grants reports to it, and belongs to it (re-entrancy tells by that). */
  readonly engine: LockOperations<HeldLock>;
  /** True once shutdown has begun: tries are refused from then on. */
  isClosing(): boolean;
  keysOf(key: string, kind?: LeaseKind): LockRedisKeys;
  /**
   * A backend command, bounded by `commandTimeout`, failing as a lock call reports it; its answer
   * (or failure) mapped in the same step when `onValue` (`onError`) is given.
   */
  readonly bounded: Bounded;
  /** Runs a clean-up command in the background, bounded, logged if it fails; close() awaits it. */
  cleanUp(command: Promise<unknown>, what?: string): void;
  /** Watches a new lock: renewed when it renews, lost at its deadline or `maxHold` either way. */
  track(lock: HeldLock, request: LockBounds): HeldLock;
  /** A call started (+1) or stopped (-1) waiting for a busy lock: the `lock.waiting` metric. */
  waiting(delta: 1 | -1): void;
}
