import type { LockHandle } from './lock-handle';

/**
 * Several keys held as one lock (`acquire(['a', 'b'])`, `withLock([...])`, `@Locked([...])`): all
 * of them, or none. One `signal` for all (it aborts when any key is lost, and the other keys are
 * released then), one `extend()` and one `release()` for all; each key keeps its own fence.
 */
export interface MultiLockHandle extends LockHandle {
  /**
   * The keys held, duplicates removed, in the order they were locked in: sorted by their Redis
   * names, the one order every caller takes them in.
   */
  readonly keys: readonly string[];
  /** Each key's own fencing token (strictly increasing per key), by key as you named it. */
  readonly fences: Readonly<Record<string, number>>;
  /** The keys joined with `', '`, for logs and messages; look keys up in `keys`. */
  readonly key: string;
  /**
   * The fence of `keys[0]` (a real fence of that key). A store guarding one of the other keys
   * must be given `fences[thatKey]`.
   */
  readonly fence: number;
  /** The token of `keys[0]`'s lease: each key's lease has a random token of its own. */
  readonly token: string;
}
