import { LockUpgradeError } from '../errors/errors';
import { semaphoreMessages } from '../errors/messages';
import type { LeaseKind } from '../keys/lease-kind';
import { leaseKindOf } from '../options/permits-option';
import type { WithLockOptions } from '../options/lock-call-options';
import { assertHoldBounds, assertMaxHold } from '../options/resolve-options';
import { monotonicElapsed } from '../util/clock';
import type { Hold } from './holds';
import { isKeyList, type LockSource, type LockTarget } from './lock-source';
import { lockContext, type LockFrame } from './lock-context';
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
 * Refuses (`LockUpgradeError`) a write of any of `key`'s locks asked for under a read of the same
 * key by the running call chain, or a kind of lock that excludes the one the chain holds there
 * (see `refuseUpgrade`), as `joinHeld` does: for `acquire` and `tryAcquire`, which join nothing,
 * but would wait for the chain's own lock all the same — and meanwhile, as a waiting writer, hold
 * back every other reader. A bad key is left to the acquire to refuse.
 */
export function assertNoUpgrade(
  locks: ServiceLockSource,
  key: LockTarget,
  options: { permits?: number; mode?: string },
): void {
  const frame = lockContext.getStore();
  if (!frame || !namesLocks(key, locks.options.maxKeyLength)) return;
  for (const one of isKeyList(key) ? key : [key]) {
    const hold = runningHold(locks, one, options, frame);
    if (hold) refuseUpgrade(hold, one, options);
  }
}

/** The chain's active hold of `key`'s lock of the kind `options` ask for, taken through `locks`. */
function runningHold(
  locks: LockSource,
  key: string,
  options: { permits?: number; mode?: string },
  frame: LockFrame | undefined,
): Hold | undefined {
  const hold = frame?.held.get(frameKeyOf(locks, key, options));
  return hold && hold.lock.owner === locks.engine && hold.active ? hold : undefined;
}

/**
 * A call that would wait for its own chain's hold of the name is refused at once, re-entrant or
 * not: a write under a read, and — every kind of lock holding the one name — a permit under any
 * other kind, or any other kind under a permit. A read under a write joins the write, as before.
 */
function refuseUpgrade(
  hold: Hold,
  key: string,
  options: { permits?: number; mode?: string },
): void {
  const held = hold.lock.redisKeys.kind?.type ?? 'exclusive';
  const asked = leaseKindOf(options)?.type ?? 'exclusive';
  if (held === 'read' && asked === 'exclusive') throw new LockUpgradeError(key);
  if ((held === 'semaphore') !== (asked === 'semaphore')) {
    const message = semaphoreMessages.nestedKindChange(key, kindName(held), kindName(asked));
    throw new LockUpgradeError(key, message);
  }
}

/** A kind of lock as the refusal names it. */
function kindName(kind: LeaseKind['type']): string {
  if (kind === 'semaphore') return 'a permit of a semaphore';
  if (kind === 'read') return 'a read lock';
  return 'a mutex (or write lock)';
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
  const hold = runningHold(locks, key, options, frame);
  if (!hold) return undefined;
  refuseUpgrade(hold, key, options);
  if (!(options.reentrant ?? locks.options.reentrant)) return undefined;
  assertSameLimit(hold, key, options);
  return hold;
}
