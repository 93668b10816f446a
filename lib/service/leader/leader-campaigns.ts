import { RedisLockConfigError } from '../../errors/errors';
import { leaderMessages } from '../../errors/messages';
import type { LockEngine } from '../../engine/lock-engine';
import { LEADER } from '../../keys/lease-kind';
import { assertLockKey } from '../../keys/lock-keys';
import type { LeadOptions, ResolvedLeadOptions } from '../../options/leader-options';
import { assertRole, leaderRoleOf, resolveLeadOptions } from '../../options/resolve-lead-options';
import { LeaderCampaign } from './leader-campaign';

/** The campaigns of one LockService, one per role. */
export class LeaderCampaigns {
  private readonly byRole = new Map<string, LeaderCampaign>();
  /** The `leaders` option, checked at construction (a bad entry or Redlock fails the start). */
  private readonly configured: { role: string; options: ResolvedLeadOptions }[];
  private stopping?: Promise<void>;

  constructor(private readonly engine: LockEngine) {
    this.configured = engine.options.leaders.map((entry, index) => {
      const { role, options } = leaderRoleOf(entry);
      return { role, options: this.check(role, options, `leaders[${index}]`) };
    });
  }

  /** Starts a campaign for `role`; refuses a role this service already campaigns for. */
  lead(role: string, options: LeadOptions): LeaderCampaign {
    const resolved = this.check(role, options, `lead('${String(role)}') options`);
    return this.start(role, resolved);
  }

  get(role: string): LeaderCampaign | undefined {
    return this.byRole.get(role);
  }

  /** At bootstrap: the `leaders` option's roles, then `roles` (`@WhenLeader`) with the defaults. */
  startAtBootstrap(roles: Iterable<string>): void {
    for (const { role, options } of this.configured) {
      if (!this.byRole.has(role)) this.start(role, options);
    }
    for (const role of roles) if (!this.byRole.has(role)) this.lead(role, {});
  }

  /** Shutdown: every campaign stops; each leader resigns once its running work has settled. */
  stopAll(): Promise<void> {
    return (this.stopping ??= Promise.all(
      [...this.byRole.values()].map((campaign) => campaign.stop(true)),
    ).then(() => undefined));
  }

  private check(role: unknown, options: LeadOptions, where: string): ResolvedLeadOptions {
    assertRole(role);
    assertLockKey(role, this.engine.options.maxKeyLength);
    this.engine.assertServes(LEADER);
    const { ttl } = this.engine.options;
    return resolveLeadOptions(where, options, ttl, (ms) => this.engine.drift(ms));
  }

  private start(role: string, options: ResolvedLeadOptions): LeaderCampaign {
    if (this.byRole.has(role)) {
      throw new RedisLockConfigError(leaderMessages.alreadyCampaigning(role));
    }
    const campaign = new LeaderCampaign(role, options, this.engine, (stopped) => {
      if (this.byRole.get(role) === stopped) this.byRole.delete(role);
    });
    this.byRole.set(role, campaign);
    campaign.start();
    return campaign;
  }
}
