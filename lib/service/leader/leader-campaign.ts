import { Logger } from '@nestjs/common';
import {
  LeadershipRevokedError,
  LockServiceClosedError,
  NotLeaderError,
  type LeaderRevokedReason,
  type LockLostError,
} from '../../errors/errors';
import { leaderMessages } from '../../errors/messages';
import { retryPause } from '../../engine/backoff';
import type { HeldLock } from '../../engine/held-lock';
import type { LockEngine } from '../../engine/lock-engine';
import { LEADER } from '../../keys/lease-kind';
import type { LeaderTerm, ResolvedLeadOptions } from '../../options/leader-options';
import { monotonicNow } from '../../util/clock';
import { settled } from '../../util/settled';
import type { LeaderHandle } from './leader-handle';

/** A term this replica holds: the lease behind it and the signal its work follows. */
interface HeldTerm {
  readonly lock: HeldLock;
  readonly controller: AbortController;
  readonly term: LeaderTerm;
  readonly startedAt: number;
  /** Resolves when the term ended (revoked or resigned). */
  readonly ended: Promise<void>;
  end(): void;
}

const logger = new Logger('RedisLock');

/**
 * One role's campaign: waits for the role's lease as a lock call would (woken by the leader's
 * release message, else retrying when its lease would end), holds it as a term — renewed by the
 * engine's watchdog, lost by the engine's rules (renewal refused, Redis out of reach past the
 * deadline, a suspended host, the term limit, shutdown) — and campaigns again after a pause.
 */
export class LeaderCampaign implements LeaderHandle {
  private current?: HeldTerm;
  private last?: LeaderTerm;
  private stopping = false;
  private stopped?: Promise<void>;
  private loop: Promise<void> = Promise.resolve();
  /** Ends the wait for the lease and the pauses between campaigns. */
  private readonly cancel = new AbortController();
  private readonly running = new Set<Promise<unknown>>();
  private readonly notLeading: AbortSignal;
  /** Waiting for the lease now: a follower. */
  following = false;

  constructor(
    readonly role: string,
    private readonly options: ResolvedLeadOptions,
    private readonly engine: LockEngine,
    private readonly onStopped: (campaign: LeaderCampaign) => void,
  ) {
    this.notLeading = AbortSignal.abort(new NotLeaderError(role));
  }

  start(): void {
    this.loop = this.campaign()
      .catch((error: unknown) => {
        logger.error(leaderMessages.campaignFailed(this.role, String(error), 0));
      })
      .then(() => {
        // Ended by the service's shutdown rather than by stop(): nothing campaigns any more.
        if (this.stopping) return;
        this.stopping = true;
        this.onStopped(this);
      });
  }

  get isLeader(): boolean {
    const current = this.current;
    // isHeld checks the local deadline first: a lease past it is lost (and the term revoked) now.
    return current !== undefined && current.lock.isHeld && this.current === current;
  }

  get term(): number {
    this.current?.lock.expireIfDue();
    return (this.current?.term ?? this.last)?.term ?? 0;
  }

  get signal(): AbortSignal {
    this.current?.lock.expireIfDue();
    return (this.current?.term ?? this.last)?.signal ?? this.notLeading;
  }

  /** When the current term began (epoch ms), if this replica leads. */
  get electedAt(): number | undefined {
    return this.isLeader ? this.current?.term.electedAt : undefined;
  }

  run<T>(work: (term: LeaderTerm) => T | Promise<T>): Promise<T | undefined> {
    if (this.stopping || !this.isLeader) return Promise.resolve(undefined);
    const { term } = this.current!;
    const running = settled(async () => work(term));
    const done = () => void this.running.delete(running);
    this.running.add(running);
    running.then(done, done);
    return running;
  }

  resign(): Promise<void> {
    return this.stop(false);
  }

  /**
   * Stops campaigning (`afterWork`: once the work `run()` started has settled, or the term ended
   * otherwise — the engine ends it when `shutdownGrace` runs out), then resigns a term it holds.
   */
  stop(afterWork: boolean): Promise<void> {
    return (this.stopped ??= this.stopOnce(afterWork));
  }

  private async stopOnce(afterWork: boolean): Promise<void> {
    this.stopping = true;
    this.cancel.abort();
    const current = this.current;
    if (current && afterWork && this.running.size > 0) {
      await Promise.race([Promise.allSettled([...this.running]), current.ended]);
    }
    if (this.current === current && current) await this.resignTerm(current);
    await this.loop;
    this.onStopped(this);
  }

  private async campaign(): Promise<void> {
    let failures = 0;
    let since = monotonicNow();
    while (!this.stopping) {
      let lock: HeldLock;
      this.following = true;
      try {
        const outcome = await this.engine.acquire({
          key: this.role,
          kind: LEADER,
          ttl: this.options.lease,
          // No budget: a follower waits for the release message, else for the lease's end.
          wait: Infinity,
          maxHold: this.options.termLimit,
          renew: true,
          signal: this.cancel.signal,
        });
        if (!('lock' in outcome)) continue; // no budget runs out: not reached
        lock = outcome.lock;
        failures = 0;
      } catch (error) {
        if (this.stopping || error instanceof LockServiceClosedError) break;
        const delay = retryPause(failures++);
        logger.warn(leaderMessages.campaignFailed(this.role, String(error), delay));
        await this.pause(delay);
        continue;
      } finally {
        this.following = false;
      }
      if (this.stopping) {
        await lock.release().catch(() => false);
        break;
      }
      await this.lead(lock, monotonicNow() - since);
      since = monotonicNow();
      const { rejoinDelay } = this.options;
      if (!this.stopping) await this.pause(rejoinDelay * (0.5 + Math.random() / 2));
    }
  }

  /** Holds one term until it ends. */
  private lead(lock: HeldLock, waitedMs: number): Promise<void> {
    let end!: () => void;
    const ended = new Promise<void>((resolve) => (end = resolve));
    const controller = new AbortController();
    const term: LeaderTerm = {
      role: this.role,
      term: lock.fence,
      signal: controller.signal,
      electedAt: Date.now(),
    };
    const current: HeldTerm = { lock, controller, term, startedAt: monotonicNow(), ended, end };
    this.current = current;
    // The lease's signal aborts synchronously when the engine declares it lost (a renewal's
    // answer, the watchdog's deadline, or a read of `isLeader` after a pause): the term ends then.
    const lost = () => this.revoke(current, lock.lost?.reason ?? 'not-owner', lock.lost);
    lock.signal.addEventListener('abort', lost, { once: true });
    this.engine.lifecycle.elected({ role: this.role, term: term.term, waitedMs });
    this.callBack('onElected', () => this.options.onElected?.(term));
    if (lock.signal.aborted) lost();
    return ended;
  }

  /** Ends `current` (once): its signal first, then the event and `onRevoked`. */
  private revoke(current: HeldTerm, reason: LeaderRevokedReason, cause?: LockLostError): void {
    if (this.current !== current) return;
    this.current = undefined;
    this.last = current.term;
    const { role, term } = current.term;
    current.controller.abort(new LeadershipRevokedError(role, term, reason, cause));
    const heldMs = monotonicNow() - current.startedAt;
    this.engine.lifecycle.revoked({ role, term, reason, heldMs });
    this.callBack('onRevoked', () => this.options.onRevoked?.(reason, current.term));
    current.end();
  }

  /** Ends the term before the lease goes, so no work of it runs beside the next leader's. */
  private async resignTerm(current: HeldTerm): Promise<void> {
    this.revoke(current, 'resigned');
    await current.lock.release().catch(() => false);
  }

  private callBack(name: 'onElected' | 'onRevoked', call: () => unknown): void {
    const failed = (error: unknown) =>
      logger.error(leaderMessages.electedCallbackFailed(this.role, name, String(error)));
    try {
      const returned = call();
      if (returned instanceof Promise) returned.catch(failed);
    } catch (error) {
      failed(error);
    }
  }

  private pause(ms: number): Promise<void> {
    const { signal } = this.cancel;
    if (signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal.addEventListener('abort', done, { once: true });
    });
  }
}
