import { Logger } from '@nestjs/common';
import { monotonicNow } from '../engine/clock';
import type { HeldLock, LockHandle } from '../engine/lock-handle';
import { LockLostError } from '../errors/lock-lost.error';

const logger = new Logger('RedisLock');

/**
 * One claim on a held lock: a `withLock` call, a `@Locked` method or a locked stream. Re-entrant
 * calls in one call chain share the lock, each with its own hold, and the holds are counted: the
 * lock is released when the last of them ends, so work a nested call started (and its caller did
 * not await) never runs on after the release. A hold that ended stops a frame that captured it
 * (a timer, a poller, a socket created inside) from re-using the lock.
 */
export class Hold {
  private ended = false;

  private constructor(
    readonly lock: HeldLock,
    /** The lock as the hold's work sees it (`currentLock()`): the lock, or a view of it. */
    readonly handle: LockHandle,
    /** How many holds of this lock have not ended yet; shared by all of them. */
    private readonly open: { count: number },
  ) {
    open.count++;
  }

  /** The first hold of a lock just acquired. */
  static of(lock: HeldLock, handle: LockHandle = lock): Hold {
    return new Hold(lock, handle, { count: 0 });
  }

  /** Another hold on the same lock, for a re-entrant call. */
  join(): Hold {
    return new Hold(this.lock, this.handle, this.open);
  }

  /** True once `end()` was called. */
  get settled(): boolean {
    return this.ended;
  }

  /** Whether calls in this hold's frame may re-use its lock: the hold runs and the lock is ours. */
  get active(): boolean {
    return !this.ended && this.lock.isHeld;
  }

  /**
   * Ends this hold; the last one releases the lock. Resolves the `LockLostError` if the work was
   * not protected to its end (lost before, or found lost by the release), else `undefined`.
   * Never rejects. Ending twice does nothing the second time.
   */
  async end(): Promise<LockLostError | undefined> {
    if (this.ended) return undefined;
    this.ended = true;
    const lock = this.lock;
    const protectedToTheEnd = lock.isHeld && monotonicNow() <= lock.validUntil;
    if (--this.open.count > 0) return protectedToTheEnd ? undefined : lostError(lock);
    const released = await releaseQuietly(lock);
    if (protectedToTheEnd && released !== false) return undefined;
    return lostError(lock);
  }
}

function lostError(lock: HeldLock): LockLostError {
  return lock.lost ?? new LockLostError(lock.key, 'deadline');
}

/**
 * A release that never throws: its failure must not mask the work's own result or error, and the
 * TTL frees the key anyway. Resolves `'unknown'` when Redis did not answer in time.
 */
export function releaseQuietly(lock: HeldLock): Promise<boolean | 'unknown'> {
  return lock.release().catch((error: unknown) => {
    logger.warn(`Releasing lock "${lock.key}" failed (${String(error)}); it expires by its TTL.`);
    return 'unknown' as const;
  });
}
