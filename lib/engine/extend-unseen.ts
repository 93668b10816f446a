import { LockLostError } from '../errors/errors';
import type { HeldLock } from './held-lock';

/**
 * Fair mode, `renew: false`: brings a lock handed over with a short lease to its full `ttl` by one
 * extension, before anyone has its handle. A loss meanwhile (that lease ran out, the key is not
 * ours) is the acquire call's business, not an event about a lock nobody was given: it resolves
 * false, and the call tries again (a lock that may still be ours was released by the loss).
 */
export async function extendUnseen(lock: HeldLock, ttl: number): Promise<boolean> {
  lock.unseen = true;
  try {
    await lock.extend(ttl);
    return true;
  } catch (error) {
    if (error instanceof LockLostError) return false;
    throw error;
  } finally {
    lock.unseen = false;
  }
}
