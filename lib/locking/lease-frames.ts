import { SemaphoreLimitConflictError } from '../errors/errors';
import { semaphoreMessages } from '../errors/messages';
import { assertLockKey } from '../keys/lock-keys';
import { leaseKindOf } from '../options/permits-option';
import type { Hold } from './holds';
import { isKeyList, type LockSource, type LockTarget } from './lock-source';

/**
 * The name a call chain's frame keeps the hold of `key` under: the lock's one name, whatever the
 * kind of lease the call asks for — every kind holds it, so a nested call of another kind finds
 * the chain's hold there and is refused (`LockUpgradeError`, see join-held) rather than joining
 * it or waiting for it. Validates `permits` on the way.
 */
export function frameKeyOf(
  locks: LockSource,
  key: string,
  options: { permits?: number; mode?: string },
): string {
  return locks.engine.keysOf(key, leaseKindOf(options)).lock;
}

/**
 * A nested permit call re-uses the permit its caller holds: refused when it names another limit,
 * as a second holder naming another limit would be. (A double's handles carry no limit: not
 * checked.)
 */
export function assertSameLimit(hold: Hold, key: string, options: { permits?: number }): void {
  const kind = hold.lock.redisKeys.kind;
  const asked = options.permits;
  if (kind?.type !== 'semaphore' || asked === undefined || kind.permits === asked) return;
  const message = semaphoreMessages.nestedLimitConflict(key, kind.permits, asked);
  throw new SemaphoreLimitConflictError(message, kind.permits, asked);
}

/**
 * Whether `key` (each of them, for several) is a lock key a frame can hold. A bad key joins
 * nothing: the acquire refuses it with `LockKeyError`, as it would outside any locked section,
 * instead of a lookup failing with a `TypeError` or the rest of a set reading as "held in part".
 */
export function namesLocks(key: LockTarget, maxKeyLength: number): boolean {
  try {
    for (const one of isKeyList(key) ? key : [key]) assertLockKey(one, maxKeyLength);
    return true;
  } catch {
    return false;
  }
}
