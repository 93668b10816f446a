import type { LockRedisKeys } from '../../keys/lock-keys';

/**
 * A role's leadership as one atomic read of the store sees it: what `LockService.inspectLeader`
 * turns into a `LeaderInfo`.
 */
export interface RawLeaderInfo {
  /** The leader's token (`"<hex> <since ms> <instance id>"`), or null when nobody leads. */
  readonly token: string | null;
  /** The leader's lease left (ms), or 0 when nobody leads. */
  readonly leaseLeftMs: number;
  /** The role's fence counter: the current term while someone leads, else the last (0: none kept). */
  readonly term: number;
  /**
   * Processes subscribed to the role's release channel: the followers waiting (each process
   * subscribes once, however many of its campaigns wait). On a Cluster without sharded pub/sub,
   * those connected to the role's node only.
   */
  readonly followers: number;
}

/** What a store reads of a role's leadership, beside the leases `KindLeases` grants. */
export interface LeaderReads {
  inspect(keys: LockRedisKeys): Promise<RawLeaderInfo>;
}
