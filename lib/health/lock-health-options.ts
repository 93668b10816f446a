import { messages } from '../errors/messages';
import { RedisLockConfigError } from '../errors/errors';
import { assertKnownOptions, type OptionNames } from '../options/known-options';
import { assertPositive } from '../options/resolve-options';

/** When `LockHealthIndicator.isHealthy()` reports down. Every field is optional. */
export interface LockHealthOptions {
  /**
   * How late the renewal loop may run, in ms, before the check is down: a tick that came this
   * much after its time (within `window`), or one overdue by this much now. Late renewals eat
   * into the lease; a loop this late usually means a blocked event loop.
   * @default a sixth of the module's `ttl` (5 000 ms for the default 30 s)
   */
  maxLag?: number;
  /**
   * How many renewal batches in a row may fail (within `window`) before the check is down. One
   * failed batch already means the locks in it are unconfirmed and run towards their deadline.
   * @default 1
   */
  maxFailedRenewals?: number;
  /**
   * What "recent" means, in ms: failures and late ticks older than this no longer count, and
   * `renewals.recentFailures` counts the failures within it.
   * @default 60 000
   */
  window?: number;
}

export type ResolvedLockHealthOptions = Required<LockHealthOptions>;

const NAMES: OptionNames<LockHealthOptions> = {
  maxLag: true,
  maxFailedRenewals: true,
  window: true,
};

/** `options` with the defaults filled in; throws `RedisLockConfigError` on a bad value. */
export function resolveHealthOptions(
  options: LockHealthOptions,
  ttl: number,
): ResolvedLockHealthOptions {
  assertKnownOptions('LockHealthIndicator.isHealthy()', options, NAMES);
  const resolved = {
    maxLag: options.maxLag ?? ttl / 6,
    maxFailedRenewals: options.maxFailedRenewals ?? 1,
    window: options.window ?? 60_000,
  };
  assertPositive('maxLag', resolved.maxLag);
  assertPositive('window', resolved.window);
  const { maxFailedRenewals } = resolved;
  if (!Number.isInteger(maxFailedRenewals) || maxFailedRenewals < 1) {
    throw new RedisLockConfigError(
      messages.badOption('maxFailedRenewals', maxFailedRenewals, 'a whole number >= 1'),
    );
  }
  return resolved;
}
