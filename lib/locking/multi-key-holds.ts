import { LockReentryError } from '../errors/errors';
import { multiKeyMessages } from '../errors/messages';
import type { Hold } from './holds';

/**
 * Re-entrancy of a multi-key call: the hold this chain runs that covers every one of `keys`
 * (`heldOne` finds the chain's hold of one key) — a multi-key lock taken further out, of these
 * keys or more — or `undefined` when the chain holds none of them (the call acquires them all).
 * Holding only some, or each through a different call, is refused with `LockReentryError`:
 * taking the rest while holding those would climb the lock order out of turn, and could deadlock
 * with a caller that holds the rest and waits for ours.
 */
export function heldAllByChain(
  keys: readonly string[],
  heldOne: (key: string) => Hold | undefined,
): Hold | undefined {
  const holds = keys.map(heldOne);
  const held = holds.filter((hold): hold is Hold => hold !== undefined);
  const [first] = held;
  if (!first) return undefined;
  if (held.length === keys.length && held.every((hold) => hold.lock === first.lock)) return first;
  const distinct = new Set(keys.filter((_, i) => holds[i] !== undefined)).size;
  throw new LockReentryError(multiKeyMessages.partlyHeld(distinct, new Set(keys).size));
}
