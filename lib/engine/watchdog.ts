import type { Logger } from '@nestjs/common';
import { messages } from '../errors/messages';
import { RedisCommandError } from '../errors/errors';
import { refusedForLackOfReplicas } from '../redis/reply-error';
import { monotonicNow } from '../util/clock';
import { neutralScope } from '../util/neutral-scope';
import type { HeldLock } from './held-lock';
import { RenewalRecord, type RenewalStatus } from './renewal-record';
import { LinkedSet } from '../util/linked-set';

/**
 * Renews a batch of locks; resolves one answer per lock: true when Redis confirmed we still own
 * it, false when we do not, undefined when that could not be told (retried like an error).
 */
export type RenewFn = (locks: HeldLock[]) => Promise<(boolean | undefined)[]>;

/**
 * Which server answers for a lock's renewal (a Cluster node), or undefined when one server
 * answers for all of them.
 */
export type ShardFn = (lock: HeldLock) => string | undefined;

/**
 * Keeps held leases alive with ONE timer for all locks (not one per lock). Each tick renews every
 * lock whose renewal is due within the batch window, one batch per server that serves them (one
 * script call per few hundred locks on one Redis; one batch per node on a Cluster), each with one
 * command timeout — so a stuck node holds up, and loses, only its own locks. It declares lost
 * every lock whose local deadline passed without a confirmed renewal — even when Redis never
 * answers (the timer is armed for the earliest deadline too). Locks renewed together stay due
 * together, so after their first renewal, locks taken at different times share batches.
 */
export class Watchdog {
  /** The locks it watches (the engine's held locks). */
  private readonly locks = new LinkedSet<HeldLock>();
  private timer?: NodeJS.Timeout;
  /** Stopped (shutdown): no timer is armed again. */
  private stopped = false;
  private timerAt = Infinity;
  /** When the armed timer should fire: `timerAt`, or now when that had already passed. */
  private firesAt = Infinity;
  private readonly record = new RenewalRecord();

  constructor(
    private readonly renew: RenewFn,
    private readonly logger: Logger,
    private readonly shardOf: ShardFn = () => undefined,
  ) {}

  get size(): number {
    return this.locks.size;
  }

  /**
   * Watches `lock`: renews it when due (unless `renews` is false) and declares it lost at its
   * deadline. False when it was watched already.
   */
  add(lock: HeldLock): boolean {
    const added = this.locks.add(lock);
    // Just granted: no need to look for a wall-clock jump here. One that happened while the grant
    // was on its way is seen at the holder's first look and at the next tick (see `deadlineSeen`).
    this.armFor(
      Math.min(lock.renews ? lock.nextRenewAt : Infinity, lock.deadlineSeen, lock.holdUntil),
    );
    return added;
  }

  /** The lock's lease changed (`extend`): make sure the timer comes in time for it. */
  reschedule(lock: HeldLock): void {
    if (this.locks.has(lock)) this.armFor(nextDue(lock));
  }

  /**
   * Stops watching `lock` (released or lost); false when it was not watched. The timer stays armed
   * when the last lock goes: a tick with nothing to do is cheaper than clearing and re-arming a
   * timer on every acquire/release cycle.
   */
  remove(lock: HeldLock): boolean {
    return this.locks.delete(lock);
  }

  /** The locks watched now. */
  watched(): HeldLock[] {
    return this.locks.toArray();
  }

  /** How renewals have gone lately, for a health check. */
  status(): RenewalStatus {
    // While locks are watched a timer is always armed, if only for their deadlines.
    const running = this.locks.size === 0 || this.timer !== undefined;
    const overdue = this.firesAt < Infinity ? monotonicNow() - this.firesAt : 0;
    return this.record.status(running, overdue);
  }

  stop(): void {
    this.stopped = true;
    this.disarm();
  }

  private armFor(at: number): void {
    if (at >= this.timerAt || this.stopped) return;
    this.disarm();
    this.timerAt = at;
    const now = monotonicNow();
    const delay = Math.max(0, at - now);
    this.firesAt = now + delay;
    this.timer = neutralScope.runInAsyncScope(() => setTimeout(() => this.tick(), delay));
    // A held lock must not keep the process alive on its own; the work holding it does.
    this.timer.unref();
  }

  private disarm(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = Infinity;
    this.firesAt = Infinity;
  }

  private tick(): void {
    const now = monotonicNow();
    this.record.ticked(now, now - this.firesAt);
    this.timer = undefined;
    this.timerAt = Infinity;
    this.firesAt = Infinity;
    const due = new Map<string | undefined, HeldLock[]>();
    for (const lock of this.locks.toArray()) {
      // Released or lost earlier in this tick (a 'lost' or abort listener may release others).
      if (!this.locks.has(lock)) continue;
      if (lock.expireIfDue(now)) continue; // deadline or maxHold passed: lost (and untracked)
      // Due within the batch window (a sixth of the lease): renew now, together with the rest.
      // Never while a renewal or an extension is in flight: lease changes go out one at a time.
      if (lock.renews && !lock.leaseChange && lock.nextRenewAt - lock.lease / 6 <= now) {
        const shard = this.shardOf(lock);
        const batch = due.get(shard);
        if (batch) batch.push(lock);
        else due.set(shard, [lock]);
      }
    }
    for (const batch of due.values()) this.renewBatch(batch);
    this.rearm();
  }

  private renewBatch(batch: HeldLock[]): void {
    const sentAt = monotonicNow();
    // Each lock with the lease it had when this renewal was sent: its answer is judged by that one.
    const sent = batch.map((lock) => ({ lock, lease: lock.lease }));
    const settled = this.renew(batch).then(
      (answers) => {
        this.record.succeeded(monotonicNow());
        sent.forEach(({ lock, lease }, i) => this.settle(lock, answers[i], sentAt, lease));
      },
      (error: unknown) => {
        this.record.failed(monotonicNow(), failureReason(error));
        if (refusedForLackOfReplicas(error)) {
          // The primary is cut off from its replicas, maybe while one is promoted elsewhere and
          // grants these keys again: give the locks up now rather than at their deadline.
          sent.forEach(({ lock, lease }) => this.settle(lock, 'no-replicas', sentAt, lease));
          return;
        }
        this.logger.warn(messages.renewFailed(messages.lockNames(batch), String(error)));
        sent.forEach(({ lock, lease }) => this.settle(lock, undefined, sentAt, lease));
      },
    );
    for (const lock of batch) lock.leaseChange = settled;
  }

  /** Applies one lock's renewal answer: renewed, lost, or (undefined) retry soon. */
  private settle(
    lock: HeldLock,
    stillOurs: boolean | undefined | 'no-replicas',
    sentAt: number,
    lease: number,
  ): void {
    lock.leaseChange = undefined;
    if (!this.locks.has(lock)) return; // released or lost meanwhile: ignore the late answer
    if (stillOurs === false || stillOurs === 'no-replicas') {
      lock.lose(stillOurs === false ? 'not-owner' : stillOurs);
      return;
    }
    if (stillOurs === undefined || lock.lease !== lease) {
      // Unknown (keep trying until the local deadline; the deadline timer declares the loss), or
      // a lease that changed meanwhile, which one-change-at-a-time rules out: renew again soon.
      lock.nextRenewAt = monotonicNow() + Math.min(lock.lease / 10, 1_000);
    } else {
      lock.renewed(sentAt, lease);
    }
    this.armFor(nextDue(lock));
  }

  private rearm(): void {
    let next = Infinity;
    for (const lock of this.locks.toArray()) next = Math.min(next, nextDue(lock));
    if (next < Infinity) this.armFor(next);
  }
}

/**
 * When the watchdog must next look at `lock`: its deadline, its `maxHold`, and its renewal if it
 * renews and has no lease change in flight (whose answer re-arms the timer).
 */
function nextDue(lock: HeldLock): number {
  const renewal = lock.renews && !lock.leaseChange ? lock.nextRenewAt : Infinity;
  return Math.min(renewal, lock.validUntil, lock.holdUntil);
}

/**
 * What a failed batch says, for a health check: the error's message, except a refusal's, which
 * names the locks (health details are shown to whoever may read the health endpoint).
 */
function failureReason(error: unknown): string {
  if (error instanceof RedisCommandError) return `Redis refused the renewal (${error.code})`;
  return error instanceof Error ? error.message : String(error);
}
