import { multiKeyMessages } from '../errors/messages';
import { RedisLockConfigError } from '../errors/errors';

/**
 * Options a multi-key call refuses, each with the values that would ask for something other than
 * a plain exclusive lock on every key. A new lock kind adds its option here.
 */
const NOT_EXCLUSIVE: Readonly<Record<string, (value: unknown) => boolean>> = {
  /** A semaphore's places. */
  permits: (value) => value !== undefined,
  /** A read-write lock's side: only `'write'` (a plain exclusive lock) goes with several keys. */
  mode: (value) => value !== undefined && value !== 'write',
};

/**
 * Throws `RedisLockConfigError` when `options` ask a multi-key call for anything but exclusive
 * locks: at the call for `LockService`, at class definition for `@Locked([...])`.
 */
export function assertExclusiveOnly(options: object): void {
  const given = options as Readonly<Record<string, unknown>>;
  for (const [name, refuses] of Object.entries(NOT_EXCLUSIVE)) {
    if (refuses(given[name])) throw new RedisLockConfigError(multiKeyMessages.exclusiveOnly(name));
  }
}
