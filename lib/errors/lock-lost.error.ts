import { messages } from './messages';
import { RedisLockError } from './redis-lock.error';

/** Why a held lock stopped being ours. */
export type LockLostReason =
  /** The key was gone or held by another token when we renewed, extended or released it. */
  | 'not-owner'
  /**
   * The lease ran out on our local (monotonic) clock before Redis' answer to its grant or to a
   * renewal arrived.
   */
  | 'deadline'
  /**
   * The `LockService` shut down while the lock was still held, after waiting `shutdownGrace` ms
   * for the work to release it: the signal aborted before the key was released.
   */
  | 'shutdown'
  /**
   * It was held for its whole `maxHold`: renewal stopped and the lock was released (for a
   * re-entrant call's own `maxHold`: that call's hold ended; the key goes with the last hold).
   */
  | 'max-hold'
  /**
   * The wall clock jumped ahead of the monotonic clock by more than the lease had left: the host
   * was probably suspended (or restored from a snapshot) while Redis kept counting.
   */
  | 'clock-jump'
  /**
   * The primary refused the renewal because too few replicas are in reach
   * (`min-replicas-to-write`): it may be cut off while a replica is promoted and grants the key
   * to someone else, so the lease is not counted on until its deadline.
   */
  | 'no-replicas';

const why: Record<LockLostReason, string> = {
  'not-owner': 'the key expired or another holder owns it',
  deadline: "the lease ran out before Redis' answer to its grant or to a renewal arrived",
  shutdown: 'the LockService shut down and its `shutdownGrace` ran out before the work released it',
  'max-hold':
    'it was held for its whole `maxHold`, so this hold ended (the key is released with the last hold); raise `maxHold` if the work needs longer',
  'clock-jump':
    'the wall clock jumped ahead of the monotonic clock, as after a suspended host, so the lease may have run out on Redis',
  'no-replicas':
    'the Redis primary refused to renew it for lack of replicas in reach (min-replicas-to-write), so it may be cut off while a replica takes over',
};

/** A held lock was lost before its holder released it: the work it protected may have overlapped. */
export class LockLostError extends RedisLockError {
  constructor(
    readonly key: string,
    readonly reason: LockLostReason,
  ) {
    super(messages.lost(key, why[reason]));
  }
}
