import { Logger } from '@nestjs/common';
import { monotonicNow, suspendedSince } from '../util/clock';
import type { HeldLease } from './held-lease';
import { LockLostError } from '../errors/errors';
import { messages } from '../errors/messages';
import { ScopedLock } from './scoped-lock';

const logger = new Logger('RedisLock');

/**
 * One claim on a held lock: a `withLock` call, a `@Locked` method or a locked stream. Re-entrant
 * calls in one call chain share the lock, each with its own hold, and the holds are counted: the
 * lock is released when the last of them ends, so work a nested call started (and its caller did
 * not await) never runs on after the release. A hold that ended stops a frame that captured it
 * (a timer, a poller, a socket created inside) from re-using the lock.
 *
 * Each hold has its own handle (`handle`): its `release()` ends this hold only, and its signal
 * aborts when this hold ends, before the lock can be released, or when the lock is lost.
 */
export class Hold {
  /** The lock as this hold's work sees it (`currentLock()`, `withLock`'s argument). */
  readonly handle: ScopedLock;
  private ending?: Promise<LockLostError | undefined>;
  private boundTimer?: ReturnType<typeof setTimeout>;
  /** When this hold started (monotonic): its own `maxHold` counts from here. */
  private readonly startedAt: number;

  private constructor(
    readonly lock: HeldLease,
    /** How many holds of this lock have not ended yet; shared by all of them. */
    private readonly open: { count: number },
    /** This hold's own bound (a joined hold may set one), in ms. */
    private readonly maxHold = Infinity,
  ) {
    open.count++;
    this.handle = new ScopedLock(lock, this);
    this.startedAt = monotonicNow();
    if (Number.isFinite(maxHold)) {
      this.boundTimer = setTimeout(() => this.expire(), maxHold);
      this.boundTimer.unref?.();
    }
  }

  /** The first hold of a lock just acquired (bounded by the lock's own `maxHold`). */
  static of(lock: HeldLease): Hold {
    return new Hold(lock, { count: 0 });
  }

  /**
   * Another hold on the same lock, for a re-entrant call. `maxHold` bounds this hold alone: at
   * that point its signal aborts with `LockLostError('max-hold')` and it ends (the last hold
   * releases the lock), whatever the other holds do.
   */
  join(maxHold?: number): Hold {
    return new Hold(this.lock, this.open, maxHold);
  }

  /** True once `end()` was called (or the hold reached its own `maxHold`). */
  get settled(): boolean {
    this.expireIfDue();
    return this.ending !== undefined;
  }

  /** Whether calls in this hold's frame may re-use its lock: the hold runs and the lock is ours. */
  get active(): boolean {
    return !this.settled && this.lock.isHeld;
  }

  /** Ends the hold if its own `maxHold` has passed; true when it ended that way or otherwise. */
  expireIfDue(): boolean {
    if (this.ending === undefined && monotonicNow() >= this.until) this.expire();
    return this.ending !== undefined;
  }

  /**
   * When this hold's own `maxHold` runs out (monotonic), less the time the host was suspended
   * since it started: Redis saw that time pass, as for the lock's own `maxHold`.
   */
  private get until(): number {
    if (this.maxHold === Infinity) return Infinity;
    return this.startedAt + this.maxHold - suspendedSince(this.startedAt);
  }

  /**
   * This hold's own `maxHold` passed: it ends as a loss for its work, whatever the others do. A
   * loss is never silent: it is reported (log and `'lost'` event, with this hold's handle) as the
   * lock's own losses are, unless the lock was lost (and reported) or released first.
   */
  private expire(): void {
    if (this.ending !== undefined) return;
    const error = new LockLostError(this.lock.key, 'max-hold');
    const lockHeld = this.lock.isHeld;
    void this.finish(error);
    if (lockHeld) this.lock.reportHoldLost(error, this.handle);
  }

  /**
   * Ends this hold: aborts its handle's signal, and the last hold releases the lock. Resolves the
   * `LockLostError` if the work was not protected to its end (lost before, found lost by the
   * release, or this hold's own `maxHold` passed), else `undefined` — a lock released on purpose
   * is not a loss. Never rejects. Every call resolves what the first one did.
   */
  end(): Promise<LockLostError | undefined> {
    return this.finish();
  }

  private finish(bound?: LockLostError): Promise<LockLostError | undefined> {
    this.ending ??= this.release(bound);
    return this.ending;
  }

  private async release(bound?: LockLostError): Promise<LockLostError | undefined> {
    clearTimeout(this.boundTimer);
    const lock = this.lock;
    // Work that checks this hold's signal stops before the key can go to someone else.
    this.handle.end(bound);
    lock.expireIfDue();
    if (--this.open.count > 0) return bound ?? lock.lost;
    const released = await releaseQuietly(lock);
    if (released === false) return lock.lost ?? new LockLostError(lock.key, 'not-owner');
    return bound ?? lock.lost;
  }
}

/**
 * A release that never throws: its failure must not mask the work's own result or error, and the
 * TTL frees the key anyway. Resolves `'unknown'` when Redis did not answer in time.
 */
export function releaseQuietly(lock: HeldLease): Promise<boolean | 'unknown'> {
  return lock.release().catch((error: unknown) => {
    logger.warn(messages.releaseFailed(lock.key, String(error)));
    return 'unknown' as const;
  });
}
