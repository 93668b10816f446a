import { messages } from '../errors/messages';
import { RedisLockConfigError } from '../errors/redis-lock-config.error';
import type { LeaseKind } from '../keys/lease-kind';

/** Refuses a `permits` option that is not a whole number >= 1 (a semaphore of 0 admits nobody). */
export function assertPermits(value: unknown): asserts value is number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) {
    throw new RedisLockConfigError(
      messages.badOption('permits', value, 'a whole number >= 1 (holders at once)'),
    );
  }
}

/**
 * The lease a call with `permits` asks for: one of N permits of a semaphore, or undefined (no
 * `permits`: the plain mutex). Validates `permits` on the way.
 */
export function leaseKindOf(permits: unknown): LeaseKind | undefined {
  if (permits === undefined) return undefined;
  assertPermits(permits);
  return { type: 'permit', permits };
}
