import type { Logger } from '@nestjs/common';
import type { EventEmitter } from 'node:events';
import type { LockLostError } from '../errors/errors';
import type { ResolvedRedisLockOptions } from '../options/redis-lock-options';
import type { LockMode } from '../telemetry/lock-mode';
import type { AcquireSpan, HoldSpan } from '../telemetry/span-handles';
import { createTelemetry, type LockTelemetry } from '../telemetry/lock-telemetry';
import { monotonicElapsed } from '../util/clock';
import type { AcquireEnd, AcquireOutcome } from './acquire-request';
import { emitSafely } from './emit-lost';
import type { HeldLock } from './held-lock';
import type { LockHandle } from './lock-handle';
import type { LeaderElectedEvent, LeaderRevokedEvent } from './lock-events';
import type { MultiAcquireOutcome } from './multi-acquire-request';

/**
 * Where a lock's lifecycle is reported: the typed events of `LockService.on()` and the
 * OpenTelemetry metrics and spans. An event's payload is built only when it has listeners, and
 * telemetry records nothing without an SDK, so all of it can stay on.
 */
export class LockLifecycle {
  readonly mode: LockMode;
  /** For `AcquireReport`. */
  readonly telemetry: LockTelemetry;

  constructor(
    private readonly events: EventEmitter,
    private readonly logger: Logger,
    options: ResolvedRedisLockOptions,
  ) {
    this.mode = options.redlock ? 'redlock' : options.fair ? 'fair' : 'default';
    this.telemetry = createTelemetry(this.mode, options.telemetry.keys ?? 'none');
  }

  /**
   * Begins the report of one acquire call: its timer starts now, and the call's end — an outcome
   * (`AcquireReport.settled`) or a failure (`AcquireReport.failed`) — is reported once, in the
   * step it comes in, with `ended` (the engine's count of calls in progress) and the caller's
   * mapping `settle` in that same step.
   */
  begin<T>(
    key: string,
    ended: () => void,
    settle: (outcome: AcquireOutcome) => T,
  ): AcquireReport<T> {
    return new AcquireReport(this, key, this.telemetry.spans?.startAcquire(key), ended, settle);
  }

  /**
   * Runs one multi-key call whose keys are taken in one step (`call`): an `'acquired'` event per
   * key when granted, one `'busy'` for the key still busy when not. (Taken one by one, each key
   * goes through `acquire()` and is reported there.)
   */
  acquireMany(call: () => Promise<MultiAcquireOutcome>): Promise<MultiAcquireOutcome> {
    const started = monotonicElapsed();
    const running = call();
    running.then(
      (outcome) => {
        const waitedMs = monotonicElapsed() - started;
        if (!('lock' in outcome)) this.busy(outcome.busyKey, waitedMs, outcome.retryAfterMs);
        else for (const lock of outcome.lock.parts) this.acquired(lock, started, undefined);
      },
      (error: unknown) =>
        this.telemetry.metrics?.acquireFailed(monotonicElapsed() - started, error),
    );
    return running;
  }

  /** An acquire call started (+1) or stopped (-1) waiting for a busy lock. */
  waiting(delta: 1 | -1): void {
    this.telemetry.metrics?.waiting(delta);
  }

  /** A lock began (+1) or stopped (-1) being held by this process. */
  held(delta: 1 | -1): void {
    this.telemetry.metrics?.held(delta);
  }

  released(lock: HeldLock): void {
    const { metrics } = this.telemetry;
    const listened = this.events.listenerCount('released') > 0;
    if (!listened && !metrics?.recording) return; // then no clock reading either
    const heldMs = monotonicElapsed() - lock.startedAt;
    metrics?.holdEnded(heldMs, 'released');
    if (!listened) return;
    const { key, fence } = lock;
    emitSafely(this.events, this.logger, 'released', { key, fence, heldMs, mode: this.mode });
  }

  /** A lock lost, or (`handle` not the lock) a re-entrant hold that reached its own `maxHold`. */
  lost(lock: HeldLock, error: LockLostError, handle: LockHandle): void {
    const { metrics } = this.telemetry;
    if (metrics) {
      metrics.lost(error.reason);
      if (handle === lock) metrics.holdEnded(monotonicElapsed() - lock.startedAt, 'lost');
    }
    emitSafely(this.events, this.logger, 'lost', error, handle);
  }

  renewalFailed(locks: readonly HeldLock[], error: unknown): void {
    this.telemetry.metrics?.renewalFailed(locks.length);
    if (this.events.listenerCount('renewal-failed') === 0) return;
    const keys = locks.map((lock) => lock.key);
    emitSafely(this.events, this.logger, 'renewal-failed', { keys, error });
  }

  /** This replica became the leader of `role`: the event, and the role's "is leader" gauge up. */
  elected(event: LeaderElectedEvent): void {
    this.telemetry.metrics?.leader(event.role, 1);
    emitSafely(this.events, this.logger, 'elected', event);
  }

  /** A term of this replica's leadership ended: the gauge down, then the event. */
  revoked(event: LeaderRevokedEvent): void {
    this.telemetry.metrics?.leader(event.role, -1);
    emitSafely(this.events, this.logger, 'revoked', event);
  }

  /** The span of a locked section, or undefined when no tracer provider is registered. */
  holdSpan(lock: Pick<HeldLock, 'key' | 'fence'>, reentrant: boolean): HoldSpan | undefined {
    return this.telemetry.spans?.startHold(lock.key, lock.fence, reentrant);
  }

  /** For `AcquireReport`: `started` is when the call began (monotonic). */
  acquired(lock: HeldLock, started: number, span: AcquireSpan | undefined): void {
    const { metrics } = this.telemetry;
    const listened = this.events.listenerCount('acquired') > 0;
    span?.acquired(lock.fence);
    if (!listened && !metrics?.recording) return; // then no clock reading either
    const waitedMs = monotonicElapsed() - started;
    metrics?.acquired(waitedMs);
    if (!listened) return;
    const { key, fence } = lock;
    emitSafely(this.events, this.logger, 'acquired', { key, fence, waitedMs, mode: this.mode });
  }

  /** For `AcquireReport`. */
  busy(key: string, waitedMs: number, retryAfterMs: number, span?: AcquireSpan): void {
    this.telemetry.metrics?.busy(waitedMs);
    span?.busy(retryAfterMs);
    if (this.events.listenerCount('busy') === 0) return;
    emitSafely(this.events, this.logger, 'busy', { key, waitedMs, retryAfterMs, mode: this.mode });
  }
}

/**
 * How one acquire call ended, reported once: the outcome (`settled`, whose value is what the
 * caller's `settle` makes of it) or a failure (`failed`). An acquirer calls exactly one of them,
 * in the step the call ends in — so the report, the count of calls in progress and the caller's
 * mapping cost no promise of their own. A `settle` that throws (busy, as a rejection) is the
 * caller's mapping, not a failed call.
 */
export class AcquireReport<T> implements AcquireEnd<T> {
  /** When the call began (monotonic): its wait budget counts from here too. */
  readonly started = monotonicElapsed();
  /** Counted out already (see `end`). */
  private over = false;

  constructor(
    private readonly lifecycle: LockLifecycle,
    private readonly key: string,
    private readonly span: AcquireSpan | undefined,
    private readonly ended: () => void,
    private readonly settle: (outcome: AcquireOutcome) => T,
  ) {}

  /** Runs the call's start (inside its span when there is one); a synchronous throw fails it. */
  run(start: () => Promise<T>): Promise<T> {
    try {
      return this.span ? this.span.run(start) : start();
    } catch (error) {
      return Promise.reject(this.fail(error));
    }
  }

  settled(outcome: AcquireOutcome): T {
    this.end();
    if (!('lock' in outcome)) {
      const waitedMs = monotonicElapsed() - this.started;
      this.lifecycle.busy(this.key, waitedMs, outcome.retryAfterMs, this.span);
      return this.settle(outcome);
    }
    try {
      this.lifecycle.acquired(outcome.lock, this.started, this.span);
      return this.settle(outcome);
    } catch (error) {
      // Telemetry or the mapping threw: nobody gets a handle, so nobody may keep the lock.
      outcome.lock.release().catch(() => false);
      throw error;
    }
  }

  /** Reports the failure and throws it. */
  failed(error: unknown): never {
    throw this.fail(error);
  }

  /** Counts the call out, once however many paths report its end. */
  private end(): void {
    if (this.over) return;
    this.over = true;
    this.ended();
  }

  private fail(error: unknown): unknown {
    this.end();
    this.lifecycle.telemetry.metrics?.acquireFailed(monotonicElapsed() - this.started, error);
    this.span?.failed(error);
    return error;
  }
}
