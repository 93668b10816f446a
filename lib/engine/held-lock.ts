import {
  LockLostError,
  RedisLockConfigError,
  RedisLockError,
  type LockLostReason,
} from '../errors/errors';
import { messages } from '../errors/messages';
import type { LockRedisKeys } from '../keys/lock-keys';
import {
  isUsableLease,
  MAX_TIMER_MS,
  monotonicElapsed,
  monotonicNow,
  shortestLease,
  suspendedSince,
} from '../util/clock';
import type { Linked } from '../util/linked-set';
import { settled } from '../util/settled';
import type { LockHandle } from './lock-handle';
import type { HeldLockOptions, LockOperations } from './lock-operations';

/**
 * A lock this process holds: its lease deadline on the local clock (shortened by wall-clock
 * jumps), its loss (the signal), and its extension and release through the engine.
 */
export class HeldLock implements LockHandle, Linked<HeldLock> {
  /** The engine's held locks (`LinkedSet`) link through these. @internal */
  linkedPrev: HeldLock | undefined = undefined;
  /** @internal */
  linkedNext: HeldLock | undefined = undefined;
  /** @internal */
  linkedIn: object | undefined = undefined;
  /**
   * Created on first read of `signal` only: an AbortSignal costs several µs, and most locks are
   * released without anyone looking at theirs. `lostError` is the state; the signal mirrors it.
   */
  private controller?: AbortController;
  private lostError?: LockLostError;
  private released?: Promise<boolean>;
  /** Current lease length in ms; `extend(ms)` changes it. */
  lease: number;
  /** The local deadline, before wall-clock jumps seen since `confirmedAt` are taken off. */
  private deadline: number;
  /** When the command behind `deadline` was sent: a wall-clock jump seen later shortens it. */
  private confirmedAt: number;
  /** The part of those jumps already taken off `deadline` and `nextRenewAt`. */
  private jumpedOff = 0;
  /** Watchdog bookkeeping: when the next renewal is due. */
  nextRenewAt: number;
  /** `maxHold`: the longest hold, counted from `startedAt`; the engine sets it (`holdFor`). */
  private maxHold = Infinity;
  /** `minHold`: a release before this (monotonic) keeps the key until then (`keepAtLeastUntil`). */
  private keepUntil = 0;
  /**
   * The renewal or extension in flight, if any. Lease changes go out one at a time, so Redis runs
   * them in the order they were sent and answered: a renewal of the old lease can never land
   * after an extension and silently cut Redis' TTL below the deadline the extension set here.
   */
  leaseChange?: Promise<unknown>;
  renews = true; // false for `renew: false`: the watchdog only watches the deadline
  /** Fair mode: granted as default mode grants (no queue then), so its release may be cheaper. */
  grantedPlain = false;
  /** Not handed to anyone yet (`extendUnseen`): a loss is not reported. */
  unseen = false;
  /** Told of the loss (once, as the signal aborts): the multi-key set this lock is part of. */
  onLost?: (error: LockLostError) => void;

  private readonly operations: LockOperations<HeldLock>;
  readonly key: string;
  readonly redisKeys: LockRedisKeys;
  readonly token: string;
  readonly fence: number;
  readonly startedAt: number;
  readonly owner: object;

  constructor(options: HeldLockOptions<HeldLock>) {
    ({
      operations: this.operations,
      key: this.key,
      redisKeys: this.redisKeys,
      token: this.token,
      fence: this.fence,
      startedAt: this.startedAt,
      owner: this.owner,
    } = options);
    const { operations, lease, startedAt } = options;
    this.lease = lease;
    this.confirmedAt = startedAt;
    this.deadline = startedAt + lease - operations.drift(lease);
    this.nextRenewAt = startedAt + lease / 3;
  }

  /** Bounds the hold to `ms` from when the granting command was sent (`Infinity`: no bound). */
  holdFor(ms: number): void {
    this.maxHold = ms;
    this.operations.rescheduled(this);
  }

  /**
   * Keeps the key held until at least `at` (monotonic) when it is released sooner: `minHold`, from
   * the acquisition or from a re-entrant call's start. The latest of these stands; `maxHold` caps it.
   */
  keepAtLeastUntil(at: number): void {
    if (at > this.keepUntil) this.keepUntil = at;
  }

  /**
   * When `maxHold` is reached (monotonic): counted from when the granting command was sent, as
   * the lease may have started then, less the time the host was suspended since — a suspended
   * holder held the lock in Redis' eyes all that time.
   */
  get holdUntil(): number {
    if (this.maxHold === Infinity) return Infinity;
    return this.startedAt + this.maxHold - suspendedSince(this.startedAt);
  }

  get validUntil(): number {
    const jumped = suspendedSince(this.confirmedAt);
    if (jumped > this.jumpedOff) {
      // Redis saw that time pass: the lease has that much less left, and is due for renewal sooner.
      this.deadline -= jumped - this.jumpedOff;
      this.nextRenewAt -= jumped - this.jumpedOff;
      this.jumpedOff = jumped;
      // Seen outside the watchdog's tick (a read of `isHeld`, say): its timer may be armed for
      // the old renewal time, too late to save what is left of the lease.
      this.operations.rescheduled(this);
    }
    return this.deadline;
  }

  /**
   * The deadline as last seen, without looking for a wall-clock jump since (`validUntil` looks).
   * A jump not seen yet only delays the watchdog's timer, as after any suspension: the holder
   * looks itself at every read of `signal` and `isHeld`, and the next tick looks too.
   */
  get deadlineSeen(): number {
    return this.deadline;
  }

  /** A deadline for the lease confirmed at construction (fair mode's hand-over sets its own). */
  set validUntil(at: number) {
    this.deadline = at;
    this.jumpedOff = 0;
  }

  /**
   * Reading the signal checks the local deadline first, so a holder that resumes after a long
   * pause (GC, SIGSTOP, a blocked event loop, a suspended host) sees it aborted before its next
   * step, even if the watchdog's timer has not fired yet.
   */
  get signal(): AbortSignal {
    this.expireIfDue();
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.lostError) this.controller.abort(this.lostError);
    }
    return this.controller.signal;
  }

  get isHeld(): boolean {
    this.expireIfDue();
    return !this.released && !this.lostError;
  }

  /** The loss, if the lock was lost (without creating the signal). */
  get lost(): LockLostError | undefined {
    return this.lostError;
  }

  /** Declares the lock lost if its deadline or its `maxHold` has passed; true when it is lost. */
  expireIfDue(now: number = monotonicNow()): boolean {
    if (!this.released && !this.lostError) {
      const reason = this.expiry(now);
      if (reason) this.lose(reason);
    }
    return this.lostError !== undefined;
  }

  private expiry(now: number): LockLostReason | undefined {
    const validUntil = this.validUntil;
    if (now >= validUntil) return now >= validUntil + this.jumpedOff ? 'deadline' : 'clock-jump';
    return now >= this.holdUntil ? 'max-hold' : undefined;
  }

  /** Records that Redis set the lease to `lease` by a command sent at `sentAt`. */
  renewed(sentAt: number, lease: number): void {
    this.confirmedAt = sentAt;
    this.jumpedOff = 0;
    this.deadline = sentAt + lease - this.operations.drift(lease);
    this.nextRenewAt = sentAt + lease / 3;
  }

  /**
   * Reports that one re-entrant hold of this lock reached its own `maxHold`; `handle` is the one
   * its work was given. The lock itself is not lost: other holds may keep it.
   */
  reportHoldLost(error: LockLostError, handle: LockHandle): void {
    this.operations.reportLost(this, error, handle);
  }

  /** Marks the lock lost (once): aborts the signal, stops renewal, reports it. */
  lose(reason: LockLostReason): LockLostError {
    if (this.lostError) return this.lostError;
    const error = new LockLostError(this.key, reason);
    this.lostError = error;
    this.operations.untrack(this);
    this.controller?.abort(error);
    this.onLost?.(error);
    this.operations.reportLost(this, error);
    const mayBeOurs =
      reason === 'max-hold' ||
      reason === 'clock-jump' ||
      reason === 'no-replicas' ||
      (reason === 'deadline' && this.renews);
    if (mayBeOurs && !this.released) {
      // A renewal may still be queued (Redis out of reach): this compare-and-delete goes out on
      // the same connection after it, so a healed link cannot leave our key alive for a lease.
      // At `maxHold`, after a clock jump, or refused for lack of replicas, the key may well be
      // ours still: free it for others.
      this.released = this.operations.releaseLease(this, () => false).catch(() => false);
    }
    return error;
  }

  async extend(ms: number = this.lease): Promise<void> {
    const drift = (lease: number) => this.operations.drift(lease);
    if (typeof ms !== 'number' || !(ms <= MAX_TIMER_MS && isUsableLease(ms, drift))) {
      throw new RedisLockConfigError(messages.badExtension(ms, shortestLease(drift), MAX_TIMER_MS));
    }
    while (this.leaseChange) await this.leaseChange; // a renewal (or extension) in flight
    this.assertHeld();
    const change = this.sendExtension(ms);
    const settled = change.catch(() => undefined);
    this.leaseChange = settled;
    try {
      await change;
    } finally {
      if (this.leaseChange === settled) this.leaseChange = undefined;
      this.operations.rescheduled(this); // the watchdog skipped its renewal meanwhile
    }
  }

  private async sendExtension(ms: number): Promise<void> {
    const sentAt = monotonicNow();
    const deadline = sentAt + ms - this.operations.drift(ms);
    if (deadline < this.validUntil) {
      // Until Redis answers, it may have run the extension already: keep to the sooner deadline
      // of the two, so neither a shorter lease nor a lost answer leaves ours beyond Redis'.
      this.deadline = deadline;
      this.nextRenewAt = Math.min(this.nextRenewAt, sentAt + ms / 3);
      this.operations.rescheduled(this);
    }
    const stillOurs = await this.operations.extendLease(this, ms).catch((error: unknown) => {
      this.assertHeld(); // lost meanwhile: say so rather than why the command failed
      throw error;
    });
    this.assertHeld(); // the deadline (or maxHold) may have passed while it was in flight
    if (!stillOurs) throw this.lose('not-owner');
    this.lease = ms;
    this.renewed(sentAt, ms);
  }

  /** Throws the loss if the lock is lost (checking its deadline first), or if it was released. */
  private assertHeld(): void {
    if (this.expireIfDue()) throw this.lostError;
    if (this.released) throw new RedisLockError(messages.released(this.key));
  }

  release(): Promise<boolean> {
    this.released ??= settled(() => this.releaseOnce());
    return this.released;
  }

  /** Releases the locks of a multi-key set (one engine's), in one command where the store can. */
  static releaseAll(locks: readonly HeldLock[]): Promise<boolean[]> {
    const [first] = locks;
    if (!first) return Promise.resolve([]);
    return first.operations.releaseTogether(() => Promise.all(locks.map((lock) => lock.release())));
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.release().then(
      () => undefined,
      (error: unknown) => this.reportReleaseFailed(error),
    );
  }

  /** Logs a release that failed where nobody awaits it (a disposed handle, a multi-key set). */
  reportReleaseFailed(error: unknown): void {
    this.operations.reportReleaseFailed(this, error);
  }

  private releaseOnce(): Promise<boolean> {
    // Stop renewal first: a renewal already sent reaches Redis before this DEL (same connection).
    this.operations.untrack(this);
    // expiry() reads validUntil, which watches the wall clock right after this reading.
    const now = monotonicElapsed();
    const lapsed = this.lostError ? undefined : this.expiry(now);
    const keepFor = lapsed ? 0 : this.keepFor(now);
    if (keepFor > 0) return this.keepLease(keepFor);
    return this.operations.releaseLease(this, (deleted) => {
      if (deleted && !lapsed && !this.lostError) {
        this.operations.reportReleased(this);
        return true;
      }
      this.lose(deleted ? (lapsed ?? 'deadline') : 'not-owner');
      return false;
    });
  }

  /**
   * How long (whole ms) the key must still be kept for `minHold`; 0 when the minimum has passed or
   * the lock is not ours to keep. A suspension counts (Redis saw that time pass), and `maxHold`
   * caps it. A lock ended by shutdown keeps its minimum too: its job ran for this tick.
   */
  private keepFor(now: number): number {
    if (this.keepUntil === 0) return 0;
    if (this.lostError && this.lostError.reason !== 'shutdown') return 0;
    const until = Math.min(this.keepUntil - suspendedSince(this.startedAt), this.holdUntil);
    return until - now >= 1 ? Math.ceil(until - now) : 0;
  }

  /**
   * Ends the hold by shortening the lease to `ms` (owner-checked, as every lease change) instead of
   * deleting the key: no waiter is woken, and the key frees by itself when the minimum has passed.
   */
  private keepLease(ms: number): Promise<boolean> {
    return this.operations.extendLease(this, ms).then((stillOurs) => {
      if (stillOurs && !this.lostError) {
        this.operations.reportReleased(this);
        return true;
      }
      if (!stillOurs) this.lose('not-owner');
      return false;
    });
  }
}
