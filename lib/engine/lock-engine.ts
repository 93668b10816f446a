import { Logger } from '@nestjs/common';
import { EventEmitter } from 'node:events';
import type { LockLostError } from '../errors/lock-lost.error';
import { messages } from '../errors/messages';
import { RedisLockError } from '../errors/redis-lock.error';
import { RedisCommandError } from '../errors/redis-command.error';
import { RedisUnavailableError } from '../errors/redis-unavailable.error';
import { lockRedisKeys, type LockRedisKeys } from '../keys/lock-keys';
import type { ResolvedRedisLockOptions } from '../module/redis-lock-options';
import { finalReplyErrorCode } from '../redis/reply-error';
import { createBackend } from '../backends/create-backend';
import type { LockBackend } from '../backends/lock-backend';
import { monotonicNow, newToken } from './clock';
import { HeldLock, type LockOperations } from './lock-handle';
import { ReleaseNotifier, type Waiter } from './release-notifier';
import { Watchdog } from './watchdog';
import { withTimeout } from './with-timeout';

/** One acquisition request, validated by the caller. */
export interface AcquireRequest {
  key: string;
  ttl: number;
  wait: number;
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
  private readonly backend: LockBackend;
  private readonly logger = new Logger('RedisLock');
  private readonly watchdog: Watchdog;
  private readonly notifier: ReleaseNotifier;
  /** Every lock held through this engine, renewed or not, for release on shutdown. */
  private readonly held = new Set<HeldLock>();
  private closing = false;

  constructor(readonly options: ResolvedRedisLockOptions) {
    this.backend = createBackend(options);
    this.watchdog = new Watchdog((locks) => this.renewLeases(locks), this.logger);
    this.notifier = new ReleaseNotifier(() => this.backend.createPubSub(), this.logger);
  }

  keysOf(key: string): LockRedisKeys {
    return lockRedisKeys(this.options.prefix, key);
  }

  /**
   * Tries at once, then (if `wait` > 0) waits for a release message or the holder's lease end.
   * Redis being out of reach (a failover, a restart) is retried with backoff while the budget
   * lasts; if it still is when the budget runs out, that error is thrown rather than "busy".
   */
  async acquire(request: AcquireRequest): Promise<AcquireOutcome> {
    const { signal } = request;
    signal?.throwIfAborted();
    const started = monotonicNow();
    const deadline = started + request.wait;
    const keys = this.keysOf(request.key);
    let unavailable: RedisUnavailableError | undefined;
    let failures = 0;
    const tryOnce = async (): Promise<HeldLock | number> => {
      try {
        const outcome = await this.attempt(request, keys);
        unavailable = undefined;
        return outcome;
      } catch (error) {
        if (!(error instanceof RedisUnavailableError) || monotonicNow() >= deadline) throw error;
        unavailable = error;
        return Math.min(50 * 2 ** failures++, 1_000);
      }
    };

    const first = await tryOnce();
    if (typeof first !== 'number') return { lock: first };
    if (request.wait <= 0) return { busyFor: first, waited: 0 };

    // Subscribe before the next try, so a release between our try and our sleep is never missed.
    const waiter: Waiter = await this.notifier.register(
      keys.channel,
      Math.min(this.options.commandTimeout, Math.max(0, deadline - monotonicNow())),
      signal,
    );
    try {
      let busyFor = first;
      for (;;) {
        const outcome = await tryOnce();
        if (typeof outcome !== 'number') return { lock: outcome };
        busyFor = outcome;
        const remaining = deadline - monotonicNow();
        if (remaining <= 0) {
          if (unavailable) throw unavailable;
          return { busyFor, waited: monotonicNow() - started };
        }
        // Fallback when no message comes (expiry, lost message): the holder's lease end + jitter.
        const jitter = Math.random() * this.options.retryJitter;
        await waiter.sleep(Math.min(busyFor + jitter, remaining), signal);
      }
    } catch (error) {
      // Leaving without the lock (cancelled, Redis out of reach): a wake-up this waiter may have
      // taken is passed on, so the others do not sleep until their fallback while the lock is free.
      this.notifier.unregister(waiter);
      this.notifier.passOn(keys.channel);
      throw error;
    } finally {
      this.notifier.unregister(waiter);
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

  /** The watchdog's batch: one bound (and one timer) for all of it, however many commands. */
  renewLeases(locks: readonly HeldLock[]): Promise<(boolean | undefined)[]> {
    return this.bounded(this.backend.renewMany(locks), 'renewal', messages.lockNames(locks));
  }

  releaseLease(lock: HeldLock): Promise<boolean> {
    this.notifier.releaseSent(lock.token);
    return this.bounded(
      this.backend.release(lock.redisKeys, lock.token),
      'release',
      `lock "${lock.key}"`,
    ).then(
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
  }

  drift(ttl: number): number {
    return this.backend.drift(ttl);
  }

  reportLost(lock: HeldLock, error: LockLostError): void {
    this.logger.warn(error.message);
    try {
      this.events.emit('lost', error, lock);
    } catch (listenerError) {
      // A throwing listener must not stop the watchdog's tick (nor become an uncaught exception).
      this.logger.error(`A 'lost' listener threw: ${String(listenerError)}`);
    }
  }

  rescheduled(lock: HeldLock): void {
    this.watchdog.reschedule(lock);
  }

  /** Stops renewal, releases what is still held (bounded), then closes what we opened. */
  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    const held = [...this.held];
    this.watchdog.stop();
    await Promise.allSettled(held.map((lock) => lock.release()));
    await this.notifier.close();
    await this.backend.close();
  }

  /** One try: a lock, or the holder's remaining lease in ms. */
  private async attempt(request: AcquireRequest, keys: LockRedisKeys): Promise<HeldLock | number> {
    if (this.closing) throw new RedisLockError(messages.shuttingDown());
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
      sent.then(
        (late) => {
          if (late > 0) void this.backend.release(keys, token).catch(() => undefined);
        },
        () => undefined,
      );
      throw error;
    }
    if (fence <= 0) return -fence;
    if (this.closing) {
      // Granted while close() ran: it took its snapshot of held locks already, so undo it here.
      void this.backend.release(keys, token).catch(() => undefined);
      throw new RedisLockError(messages.shuttingDown());
    }
    const lock = new HeldLock(this, request.key, keys, token, fence, request.ttl, sentAt, this);
    lock.renews = request.renew;
    this.held.add(lock);
    // Every held lock is watched: renewed when it renews, declared lost at its deadline either way.
    this.watchdog.add(lock);
    return lock;
  }

  /** `subject` names what the command was about, for a refusal's message (`lock "order:7"`). */
  private bounded<T>(command: Promise<T>, operation: string, subject: string): Promise<T> {
    return withTimeout(command, this.options.commandTimeout, operation).catch((error: unknown) => {
      if (error instanceof RedisLockError) throw error;
      const code = finalReplyErrorCode(error);
      if (code !== undefined) {
        const message = messages.commandRefused(operation, subject, (error as Error).message, code);
        throw new RedisCommandError(message, code, { cause: error });
      }
      throw new RedisUnavailableError(
        `Redis ${operation} failed: ${error instanceof Error ? error.message : String(error)}`,
        { cause: error },
      );
    });
  }
}

/** Resolves with `promise`, or rejects with the signal's reason as soon as it aborts. */
function raceAbort<T>(promise: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (!signal) return promise;
  signal.throwIfAborted();
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}
