import { holderOfToken, type LockHolderInfo } from '../../backends/lock-info';
import type { RawLeaderInfo } from '../../kinds/leader/leader-info';

/** Who leads a role, as `LockService.inspectLeader` reads it from the store (every replica's view). */
export interface LeaderInfo {
  readonly role: string;
  /** Whether anyone leads the role now. */
  readonly led: boolean;
  /** The leader's instance id and since when it leads (epoch ms, its wall clock), while led. */
  readonly leader?: LockHolderInfo;
  /** The current term while led; else the last one the store still keeps (0: none). */
  readonly term: number;
  /** The leader's lease left (ms), 0 when nobody leads. */
  readonly leaseLeftMs: number;
  /**
   * Processes waiting to lead: those subscribed to the role's release channel (one per process,
   * however many of its calls wait there). On a Cluster without sharded pub/sub, only those
   * connected to the role's node are counted.
   */
  readonly followers: number;
}

export function leaderInfoOf(role: string, raw: RawLeaderInfo): LeaderInfo {
  const leader = raw.token ? holderOfToken(raw.token) : undefined;
  const { term, leaseLeftMs, followers } = raw;
  return { role, led: raw.token !== null, leader, term, leaseLeftMs, followers };
}
