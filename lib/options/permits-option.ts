import { messages, semaphoreMessages } from '../errors/messages';
import { RedisLockConfigError } from '../errors/errors';
import { READ, type LeaseKind } from '../keys/lease-kind';

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
 * Validates `permits` on the way, and refuses beside it the options of read-write locks (`mode`,
 * either one, and `writerPriority`), which mean nothing for a semaphore: plain or fair, at the
 * call or at decoration, before those options' own checks can speak of readers and writers.
 */
export function leaseKindOf(options: {
  readonly permits?: unknown;
  readonly mode?: unknown;
  readonly writerPriority?: unknown;
}): LeaseKind | undefined {
  const { permits, mode } = options;
  if (permits === undefined) return mode === 'read' ? READ : undefined;
  assertPermits(permits);
  if (mode !== undefined) {
    const given = typeof mode === 'string' ? `mode: '${mode}'` : 'mode';
    throw new RedisLockConfigError(semaphoreMessages.notWithReadWrite(given));
  }
  if (options.writerPriority !== undefined) {
    throw new RedisLockConfigError(semaphoreMessages.notWithReadWrite('writerPriority'));
  }
  return { type: 'semaphore', permits };
}
