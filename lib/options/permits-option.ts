import { messages } from '../errors/messages';
import { RedisLockConfigError } from '../errors/redis-lock-config.error';
import { semaphoreMessages } from '../errors/semaphore-messages';
import { SHARED, type LeaseKind } from '../keys/lease-kind';

/** Refuses a `permits` option that is not a whole number >= 1 (a semaphore of 0 admits nobody). */
export function assertPermits(value: unknown): asserts value is number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) {
    throw new RedisLockConfigError(
      messages.badOption('permits', value, 'a whole number >= 1 (holders at once)'),
    );
  }
}

/**
 * The lease a call's options ask for: one of N permits of a semaphore (`permits`), a reader's
 * share (`mode: 'read'`), or undefined — the key alone (a mutex, or a read-write lock's writer).
 * Validates `permits` on the way, and refuses `permits` with `mode: 'read'` (a semaphore has no
 * readers).
 */
export function leaseKindOf(options: {
  readonly permits?: unknown;
  readonly mode?: unknown;
}): LeaseKind | undefined {
  const { permits, mode } = options;
  if (permits === undefined) return mode === 'read' ? SHARED : undefined;
  assertPermits(permits);
  if (mode === 'read') throw new RedisLockConfigError(semaphoreMessages.notWithRead());
  return { type: 'permit', permits };
}
