import type { LeaderRevokedReason } from '../errors/errors';

/** One term of a role's leadership, as `onElected` and `onRevoked` are given it. */
export interface LeaderTerm {
  /** The role led. */
  readonly role: string;
  /**
   * The term: the lease's fencing token, strictly increasing per role across every replica. Pass
   * it to what the leader writes, so a store can refuse a deposed leader's late writes.
   */
  readonly term: number;
  /** Aborts (with `LeadershipRevokedError`) the moment this term ends or must be assumed ended. */
  readonly signal: AbortSignal;
  /** When this replica was elected, on its wall clock (epoch ms). */
  readonly electedAt: number;
}

/** How a replica campaigns for one role (`LockService.lead`, the `leaders` option). */
export interface LeadOptions {
  /**
   * The leader's lease (ms), renewed by the watchdog every third of it: how long followers wait
   * at most for a leader that died without resigning, and how long a leader keeps leading after
   * it lost Redis. A term ends at once, locally, when the lease can no longer be confirmed.
   * @default the module's `ttl` (30000)
   */
  lease?: number;
  /**
   * The longest term (ms): the lease is given up when it is reached (reason `'max-hold'`), and
   * the replica campaigns again like any follower. `Infinity`: a term lasts while the leader
   * lives and reaches Redis.
   * @default Infinity
   */
  termLimit?: number;
  /**
   * After a term ends, how long (ms) the replica stays out of the campaign: a random delay
   * between half of this and all of it, so the followers that the release woke get in first.
   * @default 100
   */
  rejoinDelay?: number;
  /** Called when this replica becomes leader; a throw or rejection is logged. */
  onElected?: (term: LeaderTerm) => unknown;
  /**
   * Called once a term ended, after its `signal` aborted and before this replica can lead again;
   * a throw or rejection is logged.
   */
  onRevoked?: (reason: LeaderRevokedReason, term: LeaderTerm) => unknown;
}

/** A role the module campaigns for at bootstrap (`leaders`): its name, or its name and options. */
export type LeaderRoleOption = string | ({ role: string } & LeadOptions);

/** `LeadOptions` with every default filled in and checked. */
export interface ResolvedLeadOptions extends Required<
  Omit<LeadOptions, 'onElected' | 'onRevoked'>
> {
  readonly onElected?: LeadOptions['onElected'];
  readonly onRevoked?: LeadOptions['onRevoked'];
}
