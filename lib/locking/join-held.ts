import { LockUpgradeError } from '../errors/lock-upgrade.error';
import type { WithLockOptions } from '../options/lock-call-options';
import { assertHoldBounds, assertMaxHold } from '../options/resolve-options';
import { monotonicElapsed } from '../util/clock';
import type { Hold } from './holds';
import { isKeyList, type LockSource, type LockTarget } from './lock-source';
import type { LockFrame } from './lock-context';
import { assertSameLimit, frameKeyOf, namesLocks } from './lease-frames';
import { heldAllByChain } from './multi-key-holds';
import type { ServiceLockSource } from './public-lock-source';

/**
 * Another hold on the lock of `key` this chain already holds, if re-entrancy applies. Its
 * `maxHold` is checked as a fresh acquire checks it: a bound a timer cannot wait would fire at
 * once. Several keys join only a hold of all of them (`heldAllByChain`).
 */
export function joinHeld(
  locks: ServiceLockSource,
  key: LockTarget,
  options: WithLockOptions,
  frame: LockFrame | undefined,
): Hold | undefined {
  if (!frame || !namesLocks(key, locks.options.maxKeyLength)) return undefined;
  const held = isKeyList(key)
    ? heldAllByChain(key, (one) => heldByChain(locks, one, options, frame))
    : heldByChain(locks, key, options, frame);
  if (!held) return undefined;
  if (options.maxHold !== undefined) assertMaxHold('maxHold', options.maxHold);
  if (options.minHold) {
    // The joined lock is kept for this call's minimum too, counted from now (its maxHold caps it).
    assertHoldBounds(options.minHold, options.maxHold ?? Infinity);
    held.lock.keepAtLeastUntil?.(monotonicElapsed() + options.minHold);
  }
  return held.join(options.maxHold);
}

/**
 * This chain's running hold of `key` through `locks`, if re-entrancy applies. A read re-uses a
 * write or a read the chain holds; a write inside a read is refused (`LockUpgradeError`), with
 * re-entrancy off too: the writer would wait for every reader, the chain's own read included.
 */
function heldByChain(
  locks: LockSource,
  key: string,
  options: WithLockOptions,
  frame: LockFrame | undefined,
): Hold | undefined {
  if (!frame) return undefined;
  const hold = frame.held.get(frameKeyOf(locks, key, options));
  if (!hold || hold.lock.owner !== locks.engine || !hold.active) return undefined;
  // A write under a read of the same chain would wait for itself: refused at once, re-entrant
  // or not.
  if (hold.lock.redisKeys.kind?.type === 'shared' && options.mode !== 'read') {
    throw new LockUpgradeError(key);
  }
  if (!(options.reentrant ?? locks.options.reentrant)) return undefined;
  assertSameLimit(hold, key, options);
  return hold;
}
