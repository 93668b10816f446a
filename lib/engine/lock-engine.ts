import { Logger } from '@nestjs/common';
import { EventEmitter } from 'node:events';
import type { FairLockBackend, LockBackend } from '../backends/lock-backend';
import { assertServesKind } from '../backends/store-capabilities';
import { RedisLockConfigError, type LockLostError } from '../errors/errors';
import { leaderMessages, messages } from '../errors/messages';
import { LEADER, traitsOf, type LeaseKind } from '../keys/lease-kind';
import type { RawLeaderInfo } from '../kinds/leader/leader-info';
import { lockRedisKeys, type LockRedisKeys } from '../keys/lock-keys';
import type { ResolvedRedisLockOptions } from '../options/redis-lock-options';
import type { ConnectionWatch } from '../redis/connection-watch';
import type { AcquireContext, LockBounds } from './acquire-context';
import type { Acquirer, AcquireOutcome, AcquireRequest } from './acquire-request';
import { BackgroundCleanups } from './background-cleanups';
import { CallsInProgress } from './calls-in-progress';
import { CommandDeadlines, type Bounded } from '../util/command-deadlines';
import { commandFailure } from './command-errors';
import {
  assertStoreServes,
  claimStore,
  createLockStore,
  fairBackendOf,
  noConnections,
  type LockStore,
} from './engine-backend';
import { LockInspection } from './lock-inspection';
import { FairAcquirer } from './fair-acquirer';
import type { HeldLock } from './held-lock';
import { LeaseReleaser } from './lease-releaser';
import type { LockHandle } from './lock-handle';
import { LockLifecycle } from './lock-lifecycle';
import type { MultiAcquireOutcome, MultiAcquireRequest } from './multi-acquire-request';
import { MultiAcquirer } from './multi-acquirer';
import type { LockOperations } from './lock-operations';
import { PlainAcquirer } from './plain-acquirer';
import { ReleaseNotifier } from './release-notifier';
import type { RenewalStatus } from './renewal-record';
import { Watchdog } from './watchdog';

export { createLockStore, isUnclaimed, type EngineBackend, type LockStore } from './engine-backend';

/** An acquire call's outcome as it is, for callers that map nothing. */
const asOutcome = (outcome: AcquireOutcome): AcquireOutcome => outcome;

/**
 * The lifecycle of the locks of one LockService: acquire calls (plain or fair, as the options
 * say), the watchdog and the release notifier, on top of a backend. Every backend call is bounded
 * by `commandTimeout`. Knows nothing of Nest beyond its Logger.
 */
export class LockEngine implements LockOperations<HeldLock> {
  // Typed as the default event map: an inferred `EventEmitter<[never]>` in the declarations
  // fails type-checks of apps on newer @types/node (TS2344).
  readonly events: EventEmitter = new EventEmitter();
  /** Where acquires, releases, losses and renewal failures are reported: events and telemetry. */
  readonly lifecycle: LockLifecycle;
  /** The connections' health: lock calls fail at once, with the cause, while they cannot work. */
  readonly connections: ConnectionWatch;
  /** Inspection, listing and forced removal, for operators (`LockService.inspect` and others). */
  readonly inspection: LockInspection;
  private readonly backend: LockBackend;
  /** Whether `close()` closes the store: its creator does, and one made for us is ours. */
  private readonly closesStore: boolean;
  /** Fair mode: the backend, with the fair-mode commands it was checked to have. */
  private readonly fairBackend?: FairLockBackend;
  private readonly releaser: LeaseReleaser;
  private readonly logger = new Logger('RedisLock');
  private readonly watchdog: Watchdog;
  private readonly notifier: ReleaseNotifier;
  private readonly cleanups: BackgroundCleanups;
  /** Plain tries serve every kind of lease; fair mode's queue orders all but readers' shares. */
  private readonly plain: Acquirer;
  private readonly fair?: Acquirer;
  private readonly multi: MultiAcquirer;
  /** Set when shutdown begins: acquires are refused from then on. */
  private closing = false;
  private drained?: Promise<void>;
  private closed?: Promise<void>;
  /** During the shutdown grace: ends the wait once the last held lock is released or lost. */
  private whenIdle?: () => void;
  /** Acquire calls in progress, which close() waits for before it closes the connection. */
  private readonly calls = new CallsInProgress();
  /** Every backend command's bound, behind one timer. */
  private readonly deadlines: CommandDeadlines;

  /**
   * Runs on the store `createLockStore(options)` opens, unless given one (the module's, the testing
   * module's in-memory one, a unit test's fake whose missing connection watch means "always
   * healthy"). Throws when the store cannot serve the options (`fair` on Redlock, say).
   */
  constructor(
    readonly options: ResolvedRedisLockOptions,
    store: LockStore = createLockStore(options),
  ) {
    assertStoreServes(store, options);
    const { backend, connections = noConnections() } = store;
    this.backend = backend;
    this.connections = connections;
    this.deadlines = new CommandDeadlines((error, operation, subject) =>
      commandFailure(error, connections, operation, subject),
    );
    this.closesStore = claimStore(store);
    this.lifecycle = new LockLifecycle(this.events, this.logger, options);
    this.inspection = new LockInspection(backend, options.prefix, (command, operation, subject) =>
      this.bounded(command, operation, subject),
    );
    if (options.fair) this.fairBackend = fairBackendOf(backend);
    const { shardOf } = backend;
    this.watchdog = new Watchdog(
      (locks) => this.renewLeases(locks),
      this.logger,
      shardOf ? (lock) => shardOf.call(backend, lock.redisKeys) : undefined,
    );
    this.notifier = new ReleaseNotifier(() => backend.createPubSub(), this.logger);
    // A release publishes only when a refused try marked its lease (waited.lua), and a server
    // that restarted or failed over may have lost that mark, as it may have lost a message: every
    // waiter tries again (marking the lease anew) rather than sleeping until the lease ends.
    connections.onReconnected(() => this.notifier.wakeAll());
    this.releaser = new LeaseReleaser(backend, this.fairBackend, this.notifier, this.bounded);
    this.cleanups = new BackgroundCleanups(this.connections, options.commandTimeout, this.logger);
    this.plain = new PlainAcquirer(this.acquireContext(), backend);
    if (this.fairBackend) this.fair = new FairAcquirer(this.acquireContext(), this.fairBackend);
    const one = (request: AcquireRequest) => this.acquire(request);
    this.multi = new MultiAcquirer(this.acquireContext(), backend, one, options.fair);
  }

  keysOf(key: string, kind?: LeaseKind): LockRedisKeys {
    return lockRedisKeys(this.options.prefix, key, kind);
  }

  /** A key under the prefix in a layout this version cannot exclude (see `findLegacyKey`). */
  findLegacyKey(): Promise<string | undefined> {
    const search = this.backend.findLegacyKey?.(this.options.prefix, (page) =>
      this.bounded(page, "the startup check's SCAN", `the keys under "${this.options.prefix}"`),
    );
    return search ?? Promise.resolve(undefined);
  }

  /**
   * Tries at once, then waits within `wait` (see waitAfterFirstTry); in fair mode the call queues in
   * Redis and a release hands the lock to the first in line.
   */
  acquire(request: AcquireRequest): Promise<AcquireOutcome>;
  /** The same, resolving what `settle` makes of the outcome (in the step that reports it). */
  acquire<T>(request: AcquireRequest, settle: (outcome: AcquireOutcome) => T): Promise<T>;
  acquire<T>(
    request: AcquireRequest,
    settle?: (outcome: AcquireOutcome) => T,
  ): Promise<T | AcquireOutcome> {
    const acquirer = traitsOf(request.kind).queuesWhenFair ? (this.fair ?? this.plain) : this.plain;
    this.calls.begin();
    const report = this.lifecycle.begin<T | AcquireOutcome>(
      request.key,
      this.calls.end,
      settle ?? asOutcome,
    );
    return report.run(() => acquirer.acquire(request, report));
  }

  /** Multi-key: all of `request.keys` or none, in one global order (see `MultiAcquirer`). */
  acquireMany(request: MultiAcquireRequest): Promise<MultiAcquireOutcome> {
    const run = () => this.multi.acquire(request);
    // Taken one by one, each key is a single-key call of its own (tracked and reported as such).
    return this.calls.counted(
      this.multi.atOnce(request.keys) ? this.lifecycle.acquireMany(run) : run(),
    );
  }

  extendLease(lock: HeldLock, ms: number): Promise<boolean> {
    return this.bounded(
      this.backend.extend(lock.redisKeys, lock.token, Math.ceil(ms)),
      'extend',
      `lock "${lock.key}"`,
    );
  }

  /**
   * One of the watchdog's batches (all on one server): one bound (and one timer) for all of it,
   * however many commands.
   */
  renewLeases(locks: readonly HeldLock[]): Promise<(boolean | undefined)[]> {
    const names = messages.lockNames(locks);
    const renewal = this.bounded(this.backend.renewMany(locks), 'renewal', names);
    renewal.catch((error: unknown) => this.lifecycle.renewalFailed(locks, error));
    return renewal;
  }

  /** Releases `lock` (a fair release hands it to the next in line). */
  releaseLease<R>(lock: HeldLock, settle: (deleted: boolean) => R): Promise<R> {
    return this.releaser.release(lock, settle);
  }

  releaseTogether<T>(release: () => T): T {
    return this.releaser.together(release);
  }

  untrack(lock: HeldLock): void {
    if (this.watchdog.remove(lock)) this.lifecycle.held(-1);
    if (this.watchdog.size === 0) this.whenIdle?.();
  }

  /** For a health check: how many locks are held, and how their renewals have gone. @internal */
  health(): { held: number; renewals: RenewalStatus } {
    return { held: this.watchdog.size, renewals: this.watchdog.status() };
  }

  drift(ttl: number): number {
    return this.backend.drift(ttl);
  }

  /**
   * Who leads `role`, read in one atomic step, bounded as every command is (refused where the store
   * serves no leadership: Redlock).
   */
  readLeader(role: string): Promise<RawLeaderInfo> {
    this.assertServes(LEADER);
    const reads = this.backend.leaders;
    if (!reads) throw new RedisLockConfigError(leaderMessages.unsupportedStore('this store'));
    return this.bounded(reads.inspect(this.keysOf(role, LEADER)), 'inspect', `role "${role}"`);
  }

  /** Whether shutdown has begun: acquires are refused from then on. */
  get isClosing(): boolean {
    return this.closing;
  }

  /**
   * Refuses a kind of lease this engine's store cannot grant (permits on Redlock, say): called
   * where a call's or a decoration's options are read, before anything reaches the store.
   */
  assertServes(kind: LeaseKind | undefined): void {
    assertServesKind(this.backend.capabilities, kind);
  }

  reportLost(lock: HeldLock, error: LockLostError, handle: LockHandle = lock): void {
    if (lock.unseen) return; // nobody was given it: the acquire call deals with the loss
    this.logger.warn(error.message);
    this.lifecycle.lost(lock, error, handle);
  }

  reportReleased(lock: HeldLock): void {
    this.lifecycle.released(lock);
  }

  reportReleaseFailed(lock: HeldLock, error: unknown): void {
    this.logger.warn(messages.releaseFailed(lock.key, String(error)));
  }

  rescheduled(lock: HeldLock): void {
    this.watchdog.reschedule(lock);
  }

  /**
   * Shutdown, first half: refuses new acquires and ends waiting ones (fair mode: their queue
   * entries too, and a hand-off that reached them); waits up to `shutdownGrace` for held locks to
   * be released by their work, renewing them meanwhile; then aborts what is still held (reason
   * `'shutdown'`, a `'lost'` event) and only then releases it, so no other holder gets in while
   * work still believes it holds a lock. Every Redis command in it is bounded.
   */
  drain(): Promise<void> {
    return (this.drained ??= this.drainOnce());
  }

  /** Shutdown: `drain()`, then closes the store if it was made for this engine's service. */
  close(): Promise<void> {
    return (this.closed ??= this.drain().then(async () => {
      await this.notifier.close();
      if (!this.closesStore) return;
      await this.backend.close();
      this.connections.detach();
    }));
  }

  private async drainOnce(): Promise<void> {
    this.closing = true;
    this.notifier.wakeAll();
    if (this.watchdog.size > 0 && this.options.shutdownGrace > 0) {
      // The timer is not unref'd: a script whose last act is `await close()` must not exit
      // before the grace ends and the locks are released.
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        this.whenIdle = resolve;
        timer = setTimeout(resolve, this.options.shutdownGrace);
      });
      clearTimeout(timer);
      this.whenIdle = undefined;
    }
    const left = this.watchdog.watched();
    for (const lock of left) lock.lose('shutdown');
    this.watchdog.stop();
    await Promise.allSettled(left.map((lock) => lock.release()));
    await this.calls.settled();
    await this.cleanups.settled();
  }

  /** What acquire calls use of this engine. */
  private acquireContext(): AcquireContext {
    return {
      options: this.options,
      connections: this.connections,
      notifier: this.notifier,
      engine: this,
      isClosing: () => this.closing,
      keysOf: (key, kind) => this.keysOf(key, kind),
      bounded: this.bounded,
      cleanUp: (command, what) => this.cleanups.run(command, what),
      track: (lock, request) => this.track(lock, request),
      waiting: (delta) => this.lifecycle.waiting(delta),
    };
  }

  /** Watches a new lock: renewed when it renews, lost at its deadline or `maxHold` either way. */
  private track(lock: HeldLock, request: LockBounds): HeldLock {
    lock.renews = request.renew;
    lock.holdFor(request.maxHold);
    if (request.minHold) lock.keepAtLeastUntil(lock.startedAt + request.minHold);
    // Every lock held through this engine, renewed or not, is the watchdog's: it watches its
    // deadline and `maxHold` either way, and shutdown releases what it still watches.
    if (this.watchdog.add(lock)) this.lifecycle.held(1);
    return lock;
  }

  /**
   * A backend command bounded by `commandTimeout` (and cut short when the connections turn out
   * unusable), failing with the error a lock call reports (`commandFailure`). `operation` names the
   * command, `subject` what it was about, for a refusal's message (`lock "order:7"`).
   */
  private readonly bounded: Bounded = (command, operation, subject, onValue, onError) =>
    this.deadlines.bound(
      this.connections.guard(command),
      this.options.commandTimeout,
      operation,
      subject,
      onValue,
      onError,
    );
}
