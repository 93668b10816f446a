import type { Logger } from '@nestjs/common';
import type { EventEmitter } from 'node:events';
import type { LockLostError } from '../errors/errors';
import type { ResolvedRedisLockOptions } from '../options/redis-lock-options';
import type { LockMode } from '../telemetry/lock-mode';
import type { AcquireSpan, HoldSpan } from '../telemetry/span-handles';
import { createTelemetry, type LockTelemetry } from '../telemetry/lock-telemetry';
import { monotonicElapsed } from '../util/clock';
import { settled } from '../util/settled';
import type { AcquireOutcome } from './acquire-request';
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
  private readonly telemetry: LockTelemetry;

  constructor(
    private readonly events: EventEmitter,
    private readonly logger: Logger,
    options: ResolvedRedisLockOptions,
  ) {
    this.mode = options.redlock ? 'redlock' : options.fair ? 'fair' : 'default';
    this.telemetry = createTelemetry(this.mode, options.telemetry.keys ?? 'none');
  }

  /**
   * Runs one acquire call (`call`), timing it and reporting how it ended, and resolves what
   * `settle` makes of its outcome. `ended` runs first once it has settled (the engine's count of
   * calls in progress): the report, the count and the caller's mapping share one step.
   */
  acquire<T>(
    key: string,
    call: () => Promise<AcquireOutcome>,
    ended: () => void,
    settle: (outcome: AcquireOutcome) => T,
  ): Promise<T> {
    const started = monotonicElapsed();
    const span = this.telemetry.spans?.startAcquire(key);
    return settled(() => (span ? span.run(call) : call())).then(
      (outcome) => {
        ended();
        const waitedMs = monotonicElapsed() - started;
        if ('lock' in outcome) this.acquired(outcome.lock, waitedMs, span);
        else this.busy(key, waitedMs, outcome.retryAfterMs, span);
        return settle(outcome);
      },
      (error: unknown) => {
        ended();
        this.telemetry.metrics?.acquireFailed(monotonicElapsed() - started, error);
        span?.failed(error);
        throw error;
      },
    );
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
        else for (const lock of outcome.lock.parts) this.acquired(lock, waitedMs, undefined);
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
    const heldMs = monotonicElapsed() - lock.startedAt;
    this.telemetry.metrics?.holdEnded(heldMs, 'released');
    if (this.events.listenerCount('released') === 0) return;
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

  private acquired(lock: HeldLock, waitedMs: number, span: AcquireSpan | undefined): void {
    this.telemetry.metrics?.acquired(waitedMs);
    span?.acquired(lock.fence);
    if (this.events.listenerCount('acquired') === 0) return;
    const { key, fence } = lock;
    emitSafely(this.events, this.logger, 'acquired', { key, fence, waitedMs, mode: this.mode });
  }

  private busy(key: string, waitedMs: number, retryAfterMs: number, span?: AcquireSpan): void {
    this.telemetry.metrics?.busy(waitedMs);
    span?.busy(retryAfterMs);
    if (this.events.listenerCount('busy') === 0) return;
    emitSafely(this.events, this.logger, 'busy', { key, waitedMs, retryAfterMs, mode: this.mode });
  }
}
