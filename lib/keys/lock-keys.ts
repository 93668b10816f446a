import { LockKeyError } from '../errors/lock-key.error';
import { messages } from '../errors/messages';

/** The Redis names of one lock. */
export interface LockRedisKeys {
  /** The lease: `SET <lock> <token> NX PX <ttl>`. */
  readonly lock: string;
  /** The fence counter, `INCR`ed on every grant; never expires. */
  readonly fence: string;
  /** Pub/sub channel a release publishes on, to wake waiters at once. */
  readonly channel: string;
}

/**
 * Names the Redis keys of a lock. The user key sits inside a hash tag so the lease, the fence
 * counter and the channel hash to one Cluster slot (multi-key scripts never hit CROSSSLOT).
 */
export function lockRedisKeys(prefix: string, key: string): LockRedisKeys {
  const lock = `${prefix}{${key}}`;
  return { lock, fence: `${lock}:fence`, channel: `${lock}:released` };
}

/** Rejects keys that would lock nothing useful: not a string, empty, or longer than the limit. */
export function assertLockKey(key: unknown, maxKeyLength: number): asserts key is string {
  if (typeof key !== 'string' || key.length === 0) throw new LockKeyError(messages.emptyKey());
  if (key.length > maxKeyLength) {
    throw new LockKeyError(messages.keyTooLong(key.length, maxKeyLength));
  }
}
