import { multiKeyMessages } from '../errors/messages';
import { RedisLockConfigError } from '../errors/errors';

/**
 * Throws `RedisLockConfigError` when `options` ask a multi-key call for anything but exclusive
 * locks: at the call for `LockService`, at class definition for `@Locked([...])`. A new lock
 * kind adds its option here.
 */
export function assertExclusiveOnly(options: {
  readonly permits?: unknown;
  readonly mode?: unknown;
}): void {
  // A semaphore's places.
  if (options.permits !== undefined) {
    throw new RedisLockConfigError(multiKeyMessages.exclusiveOnly('permits'));
  }
  // A read-write lock's side: only 'write' (a plain exclusive lock) goes with several keys.
  if (options.mode !== undefined && options.mode !== 'write') {
    throw new RedisLockConfigError(multiKeyMessages.exclusiveOnly('mode'));
  }
}
