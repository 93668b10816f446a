import type { MultiAcquireOutcome } from '../engine/multi-acquire-request';
import type { MultiLockHandle } from '../engine/multi-lock-handle';
import { LockKeyError, LockNotAcquiredError } from '../errors/errors';
import { multiKeyMessages } from '../errors/messages';
import { assertLockKey } from '../keys/lock-keys';
import { assertExclusiveOnly } from '../options/multi-key-options';

/**
 * The keys of a multi-key call, checked: an array of at least one valid key, duplicates removed
 * (first occurrence kept). Throws `LockKeyError` otherwise, and `RedisLockConfigError` when
 * `options` ask for anything but exclusive locks.
 */
export function multiKeys(keys: unknown, options: object, maxKeyLength: number): string[] {
  assertExclusiveOnly(options);
  if (!Array.isArray(keys)) throw new LockKeyError(multiKeyMessages.notAnArray(typeof keys));
  if (keys.length === 0) throw new LockKeyError(multiKeyMessages.noKeys());
  for (const key of keys as unknown[]) assertLockKey(key, maxKeyLength);
  return [...new Set(keys as string[])];
}

/** The handle, or `LockNotAcquiredError` naming the key still busy and every key asked for. */
export function heldOrThrow(outcome: MultiAcquireOutcome): MultiLockHandle {
  if ('lock' in outcome) return outcome.lock;
  const { busyKey, waited, retryAfterMs, keys } = outcome;
  throw new LockNotAcquiredError(busyKey, waited, retryAfterMs, keys);
}

/** The handle, or null when a key was busy. */
export function heldOrNull(outcome: MultiAcquireOutcome): MultiLockHandle | null {
  return 'lock' in outcome ? outcome.lock : null;
}
