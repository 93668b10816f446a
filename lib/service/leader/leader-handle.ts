import type { LeaderTerm } from '../../options/leader-options';

/**
 * This replica's campaign for one role (`LockService.lead`): whether it leads now, its term and
 * the signal of that term. The campaign goes on after a lost term, until `resign()` or shutdown.
 */
export interface LeaderHandle {
  /** The role campaigned for. */
  readonly role: string;
  /**
   * True while this replica leads: elected, and its lease confirmed within its local deadline
   * (read on the monotonic clock, so a replica that resumes after a pause reads false — and its
   * term is revoked — before anything else it does).
   */
  readonly isLeader: boolean;
  /**
   * The current term (the lease's fence: strictly increasing per role), or the last one this
   * replica held; 0 before its first election.
   */
  readonly term: number;
  /**
   * The current term's signal: aborts (`LeadershipRevokedError`) the moment the term ends. Read it
   * again after a new election; before the first one it is already aborted (`NotLeaderError`).
   */
  readonly signal: AbortSignal;
  /**
   * Runs `work` only while this replica leads (and not once shutdown began), else resolves
   * `undefined` without running it. Shutdown waits for the work in progress (within
   * `shutdownGrace`) before it resigns.
   */
  run<T>(work: (term: LeaderTerm) => T | Promise<T>): Promise<T | undefined>;
  /**
   * Stops campaigning; a leader's term ends at once (`signal` aborts, `onRevoked('resigned')`)
   * and its lease is released, so a waiting follower leads within a round trip. Idempotent.
   */
  resign(): Promise<void>;
}
