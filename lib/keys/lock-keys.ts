import { LockKeyError } from '../errors/lock-key.error';
import { messages } from '../errors/messages';

/** The Redis names of one lock, all in one hash slot (the user key is the hash tag). */
export class LockRedisKeys {
  /** Pub/sub channel a release publishes on, to wake waiters at once. */
  readonly channel: string;

  constructor(
    /** The lease: `SET <lock> <token> NX PX <ttl>`. */
    readonly lock: string,
  ) {
    this.channel = `${lock}:released`;
  }

  /** The fence counter, `INCR`ed on every grant; never expires. */
  get fence(): string {
    return `${this.lock}:fence`;
  }

  /** Fair mode: the waiters in arrival order (ZSET). */
  get queue(): string {
    return `${this.lock}:queue`;
  }

  /** Fair mode: the waiters' entries (HASH). */
  get waiters(): string {
    return `${this.lock}:waiters`;
  }
}

/**
 * Names the Redis keys of a lock. The user key sits inside a hash tag so the lease, the fence
 * counter and the channel hash to one Cluster slot (multi-key scripts never hit CROSSSLOT).
 */
export function lockRedisKeys(prefix: string, key: string): LockRedisKeys {
  return new LockRedisKeys(`${prefix}{${hashTagSafe(key)}}`);
}

/**
 * Braces inside the tag would change which part Redis hashes (`{}x}` has an empty tag, so the
 * lease and its fence counter could land in different slots): percent-encode them, and `%` itself
 * so distinct keys stay distinct.
 */
function hashTagSafe(key: string): string {
  return /[{}%]/.test(key)
    ? key.replace(/[{}%]/g, (char) => `%${char.charCodeAt(0).toString(16).toUpperCase()}`)
    : key;
}

/** Rejects keys that would lock nothing useful: not a string, empty, or longer than the limit. */
export function assertLockKey(key: unknown, maxKeyLength: number): asserts key is string {
  if (typeof key !== 'string' || key.length === 0) throw new LockKeyError(messages.emptyKey());
  // A lone surrogate has no UTF-8 form: Redis would store U+FFFD, so distinct keys would collide.
  if (!key.isWellFormed()) throw new LockKeyError(messages.illFormedKey());
  if (key.length > maxKeyLength) {
    throw new LockKeyError(messages.keyTooLong(key.length, maxKeyLength));
  }
}
