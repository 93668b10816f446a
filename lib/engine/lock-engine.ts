import { Logger } from '@nestjs/common';
import { EventEmitter } from 'node:events';
import type { LockLostError } from '../errors/lock-lost.error';
import { messages } from '../errors/messages';
import { LockServiceClosedError } from '../errors/lock-service-closed.error';
import { RedisUnavailableError } from '../errors/redis-unavailable.error';
import { lockRedisKeys, type LockRedisKeys } from '../keys/lock-keys';
import type { ResolvedRedisLockOptions } from '../module/redis-lock-options';
import type { ConnectionWatch } from '../redis/connection-watch';
import { createBackend } from '../backends/create-backend';
import type { LockBackend } from '../backends/lock-backend';
import { BackgroundCleanups } from './background-cleanups';
import { retryPause } from './backoff';
import { monotonicNow, newToken } from './clock';
import { boundedCommand } from './command-errors';
import { emitLost } from './emit-lost';
import { extendUnseen } from './extend-unseen';
import { FairCall } from './fair-call';
import { HeldLock } from './held-lock';
import type { LockHandle, LockOperations } from './lock-handle';
import { ReleaseNotifier } from './release-notifier';
import type { Waiter } from './waiter';
import { raceAbort } from './race-abort';
import { retryRefused } from './retry-refused';
import { Watchdog } from './watchdog';
import { withTimeout } from './with-timeout';

/** One acquisition request, validated by the caller. */
export interface AcquireRequest {
  key: string;
  ttl: number;
  wait: number;
  /** Longest hold in ms from when the granting command was sent (`Infinity`: no bound). */
  maxHold: number;
  renew: boolean;
  signal?: AbortSignal;
}

/** Either a held lock, or how long the current holder's lease still runs (ms, Redis' clock). */
export type AcquireOutcome = { lock: HeldLock } | { busyFor: number; waited: number };

/**
 * The waiting strategy, the watchdog and the release notifier, on top of a backend (one Redis, a
 * Cluster, or a Redlock quorum). Every backend call is bounded by `commandTimeout`. Knows nothing
 * of Nest beyond its Logger.
 */
export class LockEngine implements LockOperations {
  readonly events = new EventEmitter();
  /** The connections' health: lock calls fail at once, with the cause, while they cannot work. */
  readonly connections: ConnectionWatch;
  private readonly backend: LockBackend;
  private readonly logger = new Logger('RedisLock');
  private readonly watchdog: Watchdog;
  private readonly notifier: ReleaseNotifier;
  /** Every lock held through this engine, renewed or not, for release on shutdown. */
  private readonly held = new Set<HeldLock>();
  /** Set when shutdown begins: acquires are refused from then on. */
  private closing = false;
  private drained?: Promise<void>;
  private closed?: Promise<void>;
  /** During the shutdown grace: ends the wait once the last held lock is released or lost. */
  private whenIdle?: () => void;
  /** Acquire calls in progress, which close() waits for before it closes the connection. */
  private readonly calls = new Set<Promise<AcquireOutcome>>();
  private readonly cleanups: BackgroundCleanups;

  /**
   * Fair mode: how long a waiter's queue entry lives without a refresh, and the longest lease a
   * hand-off gives — so a waiter that died while queued holds up the queue no longer than this.
   * Room for a refresh that takes a whole `commandTimeout`.
   */
  private readonly waiterTtl: number;

  constructor(readonly options: ResolvedRedisLockOptions) {
    this.waiterTtl = Math.ceil(Math.max(1_000, 2 * options.commandTimeout));
    ({ backend: this.backend, connections: this.connections } = createBackend(options));
    this.watchdog = new Watchdog(
      (locks) => this.renewLeases(locks),
      this.logger,
      this.backend.shardOf ? (lock) => this.backend.shardOf!(lock.redisKeys) : undefined,
    );
    this.notifier = new ReleaseNotifier(() => this.backend.createPubSub(), this.logger);
    this.cleanups = new BackgroundCleanups(this.connections, options.commandTimeout, this.logger);
  }

  keysOf(key: string): LockRedisKeys {
    return lockRedisKeys(this.options.prefix, key);
  }

  /**
   * Tries at once, then (if `wait` > 0) waits for a release message or the holder's lease end.
   * Redis being out of reach (a failover, a restart) is retried with backoff while the budget
   * lasts; if it still is when the budget runs out, that error is thrown rather than "busy".
   * In fair mode the waiter queues in Redis under one token for the whole call, and a release
   * hands the lock to it directly (a `grant` message) when it is first in line.
   */
  acquire(request: AcquireRequest): Promise<AcquireOutcome> {
    const call = this.acquireOnce(request);
    this.calls.add(call);
    const forget = (): void => void this.calls.delete(call);
    call.then(forget, forget);
    return call;
  }

  private async acquireOnce(request: AcquireRequest): Promise<AcquireOutcome> {
    const { signal } = request;
    signal?.throwIfAborted();
    const started = monotonicNow();
    const deadline = started + request.wait;
    const keys = this.keysOf(request.key);
    const fair = this.options.fair ? new FairCall(newToken(), started) : undefined;
    let unavailable: RedisUnavailableError | undefined;
    let failures = 0;
    const tryOnce = async (step: () => Promise<HeldLock | number>): Promise<HeldLock | number> => {
      try {
        const outcome = await step();
        unavailable = undefined;
        return outcome;
      } catch (error) {
        if (!(error instanceof RedisUnavailableError) || monotonicNow() >= deadline) throw error;
        // Never connected, or turned away for good (credentials): waiting will not help.
        if (this.connections.unavailable()) throw error;
        unavailable = error;
        return retryPause(failures++);
      }
    };
    /** Fair mode: leave the queue on the way out, unless we hold the lock or never queued. */
    let leave = fair !== undefined;
    try {
      const first = await tryOnce(() => this.attempt(request, keys, fair, false));
      if (typeof first !== 'number') {
        leave = false;
        return { lock: first };
      }
      if (request.wait <= 0) {
        leave = false; // answered "busy" without queueing: nothing to undo
        return { busyFor: first, waited: 0 };
      }

      // Subscribe before the next try, so a release between our try and our sleep is never missed.
      const waiter: Waiter = await this.notifier.register(
        keys.channel,
        Math.min(this.options.commandTimeout, Math.max(0, deadline - monotonicNow())),
        signal,
        fair?.token,
      );
      // Fair mode: a queued waiter refreshes its entry before it lapses.
      const refreshEvery = fair ? Math.min(this.waiterTtl, request.ttl) / 3 : Infinity;
      try {
        let busyFor = first;
        for (;;) {
          const outcome = await tryOnce(() => this.attempt(request, keys, fair, true));
          if (typeof outcome !== 'number') {
            leave = false;
            return { lock: outcome };
          }
          busyFor = outcome;
          let granted = fair?.takeGrant(waiter);
          if (granted === undefined) {
            const remaining = deadline - monotonicNow();
            if (remaining <= 0) {
              if (unavailable) throw unavailable;
              return { busyFor, waited: monotonicNow() - started };
            }
            // Fallback when no message comes (expiry, lost message): the holder's lease end + jitter.
            const jitter = Math.random() * this.options.retryJitter;
            await waiter.sleep(Math.min(busyFor + jitter, remaining, refreshEvery), signal);
            granted = fair?.takeGrant(waiter);
          }
          if (granted !== undefined) {
            // Redis out of reach while taking it on: the next try finds the lock ours and takes
            // it on again; a call that gives up leaves the queue, which frees it.
            const adopted = await tryOnce(() => this.handedOver(request, keys, fair!, granted));
            if (typeof adopted !== 'number') {
              leave = false;
              return { lock: adopted };
            }
          }
        }
      } catch (error) {
        // Leaving without the lock (cancelled, Redis out of reach): a wake-up this waiter may have
        // taken is passed on, so the others do not sleep until their fallback while it is free.
        this.notifier.unregister(waiter);
        if (!fair) this.notifier.passOn(keys.channel);
        throw error;
      } finally {
        this.notifier.unregister(waiter);
      }
    } finally {
      // Fair mode, leaving without the lock: leave the queue, and pass on a hand-off (or a late
      // grant of a try we stopped waiting for) so the next in line does not wait for it to lapse.
      if (fair && leave) this.leaveQueue(keys, fair);
    }
  }

  async isLocked(key: string): Promise<boolean> {
    return this.bounded(this.backend.isLocked(this.keysOf(key)), 'EXISTS', `lock "${key}"`);
  }

  async forceRelease(key: string): Promise<boolean> {
    return this.bounded(
      this.backend.forceRelease(this.keysOf(key)),
      'force-release',
      `lock "${key}"`,
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
    return this.bounded(this.backend.renewMany(locks), 'renewal', messages.lockNames(locks));
  }

  /**
   * Releases `lock`. A release Redis refused unrun (a slot in migration) is sent again until it
   * is answered or the lock's deadline passes — after that its key has expired by itself.
   */
  releaseLease(lock: HeldLock): Promise<boolean> {
    const release = (free: () => Promise<boolean>): Promise<boolean> =>
      retryRefused(
        () => this.bounded(free(), 'release', `lock "${lock.key}"`),
        () => lock.validUntil,
      );
    if (this.options.fair) {
      // The release script hands the lock to the next in line itself: no local hand-off.
      return release(() => this.freeLease(lock.redisKeys, lock.token));
    }
    this.notifier.releaseSent(lock.token);
    return release(() => this.backend.release(lock.redisKeys, lock.token)).then(
      (deleted) => {
        this.notifier.releaseAnswered(lock.redisKeys.channel, lock.token, deleted);
        return deleted;
      },
      (error: unknown) => {
        this.notifier.releaseAnswered(lock.redisKeys.channel, lock.token, false);
        throw error;
      },
    );
  }

  untrack(lock: HeldLock): void {
    this.held.delete(lock);
    this.watchdog.remove(lock);
    if (this.held.size === 0) this.whenIdle?.();
  }

  drift(ttl: number): number {
    return this.backend.drift(ttl);
  }

  reportLost(lock: HeldLock, error: LockLostError, handle: LockHandle = lock): void {
    if (lock.unseen) return; // nobody was given it: the acquire call deals with the loss
    this.logger.warn(error.message);
    emitLost(this.events, this.logger, error, handle);
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

  /** Shutdown: `drain()`, then closes what we opened. */
  close(): Promise<void> {
    return (this.closed ??= this.drain().then(async () => {
      await this.notifier.close();
      await this.backend.close();
      this.connections.detach();
    }));
  }

  private async drainOnce(): Promise<void> {
    this.closing = true;
    this.notifier.wakeAll();
    if (this.held.size > 0 && this.options.shutdownGrace > 0) {
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
    const left = [...this.held];
    for (const lock of left) lock.lose('shutdown');
    this.watchdog.stop();
    await Promise.allSettled(left.map((lock) => lock.release()));
    await Promise.allSettled([...this.calls]);
    await this.cleanups.settled();
  }

  /**
   * One try: a lock, or the ms until another try is worth it (the holder's remaining lease).
   * Fair mode tries as the call's token, joining (or staying in) the queue when `queue` is set.
   */
  private async attempt(
    request: AcquireRequest,
    keys: LockRedisKeys,
    fair: FairCall | undefined,
    queue: boolean,
  ): Promise<HeldLock | number> {
    if (this.closing) throw new LockServiceClosedError(messages.shuttingDown());
    const down = this.connections.unavailable();
    if (down) throw down; // not even queued: no late grant to undo
    if (fair) return this.attemptFair(request, keys, fair, queue);
    const token = newToken();
    const sentAt = monotonicNow();
    const sent = this.backend.acquire(keys, token, Math.ceil(request.ttl));
    let fence: number;
    try {
      fence = await raceAbort(
        this.bounded(sent, 'acquire', `lock "${request.key}"`),
        request.signal,
      );
    } catch (error) {
      // Timed out or cancelled while the server may still grant it: free that grant when it lands.
      this.cleanUp(sent.then((late) => (late > 0 ? this.backend.release(keys, token) : false)));
      throw error;
    }
    if (fence <= 0) return -fence;
    if (this.closing) {
      // Granted while close() ran: it took its snapshot of held locks already, so undo it here.
      this.cleanUp(this.backend.release(keys, token));
      throw new LockServiceClosedError(messages.shuttingDown());
    }
    const lock = new HeldLock({
      operations: this,
      key: request.key,
      redisKeys: keys,
      token,
      fence,
      lease: request.ttl,
      startedAt: sentAt,
      owner: this,
    });
    return this.track(lock, request);
  }

  /**
   * A fair-mode try. A late answer needs no clean-up here: the token stays the call's, so a later
   * try finds a late grant ours, and a call that leaves frees it (`leaveQueue`, after this try).
   */
  private async attemptFair(
    request: AcquireRequest,
    keys: LockRedisKeys,
    fair: FairCall,
    queue: boolean,
  ): Promise<HeldLock | number> {
    const sentAt = monotonicNow();
    const sent = this.backend.fairAcquire!(
      keys,
      fair.token,
      Math.ceil(request.ttl),
      queue,
      this.waiterTtl,
    );
    fair.inFlight = sent;
    const reply = await raceAbort(
      this.bounded(sent, 'acquire', `lock "${request.key}"`),
      request.signal,
    );
    if ('busy' in reply) {
      fair.busy(sentAt, reply.fence, queue);
      return reply.busy;
    }
    if (this.closing) throw new LockServiceClosedError(messages.shuttingDown()); // the call leaves
    if ('granted' in reply) {
      const lock = new HeldLock({
        operations: this,
        key: request.key,
        redisKeys: keys,
        token: fair.token,
        fence: reply.granted,
        lease: request.ttl,
        startedAt: sentAt,
        owner: this,
      });
      return this.track(lock, request);
    }
    // Already ours: handed over by a release whose message we missed. Its lease ends `pttl`
    // after this try ran, which was after we sent it.
    const lock = new HeldLock({
      operations: this,
      key: request.key,
      redisKeys: keys,
      token: fair.token,
      fence: reply.ours,
      lease: request.ttl,
      startedAt: sentAt,
      owner: this,
    });
    lock.validUntil = sentAt + reply.pttl - this.drift(reply.pttl);
    return this.adopt(lock, request);
  }

  /**
   * Fair mode: a release handed us the lock (its `grant` message). It did so after our last busy
   * try ran, with a lease of `min(ttl, entry lifetime)` at the most and no shorter than what is
   * left of that from when that try was sent (`queuedSince`): a sound deadline on our clock.
   */
  private async handedOver(
    request: AcquireRequest,
    keys: LockRedisKeys,
    fair: FairCall,
    fence: number,
  ): Promise<HeldLock | number> {
    // The call leaves the queue on its way out, which hands the lock on to the next in line.
    if (this.closing) throw new LockServiceClosedError(messages.shuttingDown());
    const lease = Math.min(Math.ceil(request.ttl), this.waiterTtl);
    const lock = new HeldLock({
      operations: this,
      key: request.key,
      redisKeys: keys,
      token: fair.token,
      fence,
      lease: request.ttl,
      startedAt: fair.queuedSince,
      owner: this,
    });
    lock.validUntil = fair.queuedSince + lease - this.drift(lease);
    return this.adopt(lock, request);
  }

  /**
   * Fair mode: takes on a lock handed over with what is left of a short lease, and brings it to
   * the full ttl at once — by the watchdog's next tick, or (`renew: false`) one extension. That
   * extension runs before the lock is tracked: if it fails, no handle is left behind to report a
   * loss of a lock nobody was given (the call retries, or leaves the queue and frees it). Lost
   * meanwhile: 0, the call tries again at once.
   */
  private async adopt(lock: HeldLock, request: AcquireRequest): Promise<HeldLock | number> {
    if (!request.renew) {
      if (!(await extendUnseen(lock, request.ttl))) return 0;
      // Shutdown began meanwhile and no longer waits for it: the call leaves, which frees it.
      if (this.closing) throw new LockServiceClosedError(messages.shuttingDown());
      return this.track(lock, request);
    }
    this.track(lock, request);
    lock.nextRenewAt = monotonicNow();
    this.watchdog.reschedule(lock);
    return lock;
  }

  /** Watches a new lock: renewed when it renews, lost at its deadline or `maxHold` either way. */
  private track(lock: HeldLock, request: AcquireRequest): HeldLock {
    lock.renews = request.renew;
    lock.holdFor(request.maxHold);
    this.held.add(lock);
    this.watchdog.add(lock);
    return lock;
  }

  /** Frees a lease this engine was granted (fair mode: hands it to the next in line). */
  private freeLease(keys: LockRedisKeys, token: string): Promise<boolean> {
    return this.options.fair
      ? this.backend.fairRelease!(keys, token)
      : this.backend.release(keys, token);
  }

  /**
   * Fair mode: leaves the queue and passes on a hand-off that reached us. Sent once the call's
   * last try has run (bounded): on one connection a later command runs later, except when that
   * try is re-sent (NOSCRIPT, a reconnect) — then it could queue us again after we left.
   */
  private leaveQueue(keys: LockRedisKeys, fair: FairCall): void {
    const afterLastTry = withTimeout(
      fair.inFlight ?? Promise.resolve(),
      this.options.commandTimeout,
      'acquire',
    ).catch(() => undefined);
    this.cleanUp(
      afterLastTry.then(() => this.freeLease(keys, fair.token)),
      'Leaving a fair queue',
    );
  }

  /** Runs a clean-up command in the background, bounded, logged if it fails; close() awaits it. */
  private cleanUp(command: Promise<unknown>, what?: string): void {
    this.cleanups.run(command, what);
  }

  /** `subject` names what the command was about, for a refusal's message (`lock "order:7"`). */
  private bounded<T>(command: Promise<T>, operation: string, subject: string): Promise<T> {
    return boundedCommand(
      this.connections,
      this.options.commandTimeout,
      command,
      operation,
      subject,
    );
  }
}
