import { RedisLockConfigError } from '../errors/errors';
import { leaderMessages, messages } from '../errors/messages';
import { assertKnownOptions, type OptionNames } from './known-options';
import type { LeaderRoleOption, LeadOptions, ResolvedLeadOptions } from './leader-options';
import { assertLease, assertMaxHold, assertNonNegative } from './resolve-options';

const LEAD_OPTION_NAMES: OptionNames<LeadOptions> = {
  lease: true,
  termLimit: true,
  rejoinDelay: true,
  onElected: true,
  onRevoked: true,
};

/** The default of `rejoinDelay`. */
const REJOIN_DELAY_MS = 100;

/** Refuses a role that names nothing: not a string, or empty. */
export function assertRole(role: unknown): asserts role is string {
  if (typeof role !== 'string' || role.length === 0) {
    throw new RedisLockConfigError(leaderMessages.badRole(role));
  }
}

/**
 * `options` over the module's `ttl` (the lease's default), checked: the lease against the store's
 * drift margin, callbacks as functions. One path for `lead()` and the `leaders` option.
 */
export function resolveLeadOptions(
  where: string,
  options: LeadOptions,
  ttl: number,
  drift: (ms: number) => number,
): ResolvedLeadOptions {
  if (typeof options !== 'object' || options === null) {
    throw new RedisLockConfigError(messages.badOption(where, options, 'an options object'));
  }
  assertKnownOptions(where, options, LEAD_OPTION_NAMES);
  const lease = options.lease ?? ttl;
  const termLimit = options.termLimit ?? Infinity;
  const rejoinDelay = options.rejoinDelay ?? REJOIN_DELAY_MS;
  assertLease('lease', lease, drift);
  assertMaxHold('termLimit', termLimit);
  assertNonNegative('rejoinDelay', rejoinDelay);
  for (const name of ['onElected', 'onRevoked'] as const) {
    const callback: unknown = options[name];
    if (callback !== undefined && typeof callback !== 'function') {
      throw new RedisLockConfigError(messages.badOption(name, callback, 'a function'));
    }
  }
  const { onElected, onRevoked } = options;
  return { lease, termLimit, rejoinDelay, onElected, onRevoked };
}

/** A `leaders` entry as its role and its options. */
export function leaderRoleOf(entry: LeaderRoleOption): { role: string; options: LeadOptions } {
  if (typeof entry === 'string') return { role: entry, options: {} };
  if (typeof entry !== 'object' || entry === null) {
    throw new RedisLockConfigError(leaderMessages.badRole(entry));
  }
  const { role, ...options } = entry;
  return { role, options };
}
