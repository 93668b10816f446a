import type { Logger } from '@nestjs/common';
import { monotonicNow } from './clock';
import type { HeldLock } from './lock-handle';

/** Sends one renewal; resolves true when Redis confirmed we still own the lock. */
export type RenewFn = (lock: HeldLock) => Promise<boolean>;

/**
 * Keeps held leases alive with ONE timer for all locks (not one per lock). Each tick renews every
 * lock whose renewal is due within the batch window in the same event-loop turn, so ioredis writes
 * them together, and declares lost every lock whose local deadline passed without a confirmed
 * renewal — even when Redis never answers (the timer is armed for the earliest deadline too).
 */
export class Watchdog {
  private readonly locks = new Set<HeldLock>();
  private timer?: NodeJS.Timeout;
  private timerAt = Infinity;

  constructor(
    private readonly renew: RenewFn,
    private readonly logger: Logger,
  ) {}

  get size(): number {
    return this.locks.size;
  }

  /** Watches `lock`: renews it when due (unless `renews` is false) and declares it lost at its deadline. */
  add(lock: HeldLock): void {
    this.locks.add(lock);
    this.armFor(nextDue(lock));
  }

  /** The lock's lease changed (`extend`): make sure the timer comes in time for it. */
  reschedule(lock: HeldLock): void {
    if (this.locks.has(lock)) this.armFor(nextDue(lock));
  }

  remove(lock: HeldLock): void {
    // The timer stays armed when the last lock goes: a tick with nothing to do is cheaper than
    // clearing and re-arming a timer on every acquire/release cycle.
    this.locks.delete(lock);
  }

  stop(): void {
    this.locks.clear();
    this.disarm();
  }

  private armFor(at: number): void {
    if (at >= this.timerAt) return;
    this.disarm();
    this.timerAt = at;
    this.timer = setTimeout(() => this.tick(), Math.max(0, at - monotonicNow()));
    // A held lock must not keep the process alive on its own; the work holding it does.
    this.timer.unref();
  }

  private disarm(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = Infinity;
  }

  private tick(): void {
    this.timer = undefined;
    this.timerAt = Infinity;
    const now = monotonicNow();
    for (const lock of this.locks) {
      if (now >= lock.validUntil) {
        lock.lose('deadline');
      } else if (lock.renews && !lock.renewing && lock.nextRenewAt - lock.lease / 6 <= now) {
        // Due within the batch window (a sixth of the lease): renew now, together with the rest.
        this.renewOne(lock);
      }
    }
    this.rearm();
  }

  private renewOne(lock: HeldLock): void {
    lock.renewing = true;
    const sentAt = monotonicNow();
    const lease = lock.lease;
    this.renew(lock).then(
      (stillOurs) => {
        lock.renewing = false;
        if (!this.locks.has(lock)) return; // released or lost meanwhile: ignore the late answer
        if (!stillOurs) {
          lock.lose('not-owner');
          return;
        }
        // An extend() since this renewal was sent set the lease (and Redis' TTL) itself.
        if (lock.lease !== lease) return;
        lock.renewed(sentAt, lease);
        this.armFor(nextDue(lock));
      },
      (error: unknown) => {
        lock.renewing = false;
        if (!this.locks.has(lock)) return;
        // Keep trying until the local deadline; the deadline timer declares the loss.
        this.logger.warn(`Renewing lock "${lock.key}" failed: ${String(error)}; retrying.`);
        lock.nextRenewAt = monotonicNow() + Math.min(lock.lease / 10, 1_000);
        this.armFor(nextDue(lock));
      },
    );
  }

  private rearm(): void {
    let next = Infinity;
    for (const lock of this.locks) {
      next = Math.min(next, lock.renewing ? lock.validUntil : nextDue(lock));
    }
    if (next < Infinity) this.armFor(next);
  }
}

/** When the watchdog must next look at `lock`: its renewal (if it renews) or its deadline. */
function nextDue(lock: HeldLock): number {
  return lock.renews ? Math.min(lock.nextRenewAt, lock.validUntil) : lock.validUntil;
}
