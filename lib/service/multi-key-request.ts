import { LockKeyError } from '../errors/lock-key.error';
import { multiKeyMessages } from '../errors/multi-key-messages';
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

/** Whether a lock call was given several keys (an array) rather than one. */
export function isKeyList(key: string | readonly string[]): key is readonly string[] {
  return Array.isArray(key);
}
