import {
  Injectable,
  type BeforeApplicationShutdown,
  type OnApplicationShutdown,
} from '@nestjs/common';
import type { LeadOptions } from '../options/leader-options';
import { LeaderCampaigns } from './leader/leader-campaigns';
import type { LeaderHandle } from './leader/leader-handle';
import { leaderInfoOf, type LeaderInfo } from './leader/leader-info';
import type { LockInfo, LockListPage } from '../backends/lock-info';
import type { EvictedLock } from '../backends/lock-eviction';
import type { LockHandle } from '../engine/lock-handle';
import type { MultiLockHandle } from '../engine/multi-lock-handle';
import { LockEngine, type LockStore } from '../engine/lock-engine';
import type { LockEventListener, LockEventName } from '../engine/lock-events';
import { assertLockKey } from '../keys/lock-keys';
import { isKeyList, type LockSource } from '../locking/lock-source';
import { assertNoUpgrade } from '../locking/join-held';
import { markInternalLockSource } from '../locking/public-lock-source';
import { runLocked } from '../locking/run-locked';
import { heldOrNull, heldOrThrow } from './multi-key-request';
import { acquireMany, acquireOne, lockRequest } from './lock-request';
import type { AcquireOptions, WithLockOptions } from '../options/lock-call-options';
import type {
  RedisLockModuleOptions,
  ResolvedRedisLockOptions,
} from '../options/redis-lock-options';
import { assertPositive, resolveOptions } from '../options/resolve-options';
import { settled } from '../util/settled';

/**
 * Distributed locks on Redis. Injected by `RedisLockModule`; usable on its own as
 * `new LockService({ redis: 'redis://…' })` (then call `close()` when done).
 */
@Injectable()
export class LockService implements LockSource, BeforeApplicationShutdown, OnApplicationShutdown {
  /** The engine; not part of the public API (left out of the published declarations). @internal */
  readonly engine: LockEngine;
  /** This service's campaigns for leader roles (`lead`). @internal */
  readonly leaders: LeaderCampaigns;

  /**
   * @param options The module options (validated here: a bad one throws `RedisLockConfigError`).
   * @param store The lock store to run on: `RedisLockModule` passes the one it provides under
   * `LOCK_STORE`. Left out, the service opens the store its options describe, and `close()` closes
   * it. A store is closed by whoever made it: the modules make theirs for their one service, which
   * closes it last in its shutdown; the service never closes a store made elsewhere.
   */
  constructor(options: RedisLockModuleOptions = {}, store?: LockStore) {
    this.engine = new LockEngine(resolveOptions(options), store);
    this.leaders = new LeaderCampaigns(this.engine);
  }

  /** The module options with defaults filled in. */
  get options(): ResolvedRedisLockOptions {
    return this.engine.options;
  }

  /**
   * Acquires `key`, waiting up to `wait` ms (default: the module's `wait`, 0) for a busy lock.
   * Rejects with `LockNotAcquiredError` when the budget runs out. Always `release()` the handle,
   * or use `withLock`. With `permits: N`, takes one of N permits of the key's semaphore.
   *
   * @example
   * ```ts
   * const lock = await locks.acquire(`stock:${sku}`, { wait: 2_000 });
   * try { await reserve(sku, lock.fence); } finally { await lock.release(); }
   * const slot = await locks.acquire('export:42', { permits: 3, wait: 10_000 });
   * ```
   * Given an array of keys, takes all of them or none (docs/multi-key.md): exclusive locks, one
   * handle, one signal, a fence per key.
   */
  acquire(keys: readonly string[], options?: AcquireOptions): Promise<MultiLockHandle>;
  acquire(key: string, options?: AcquireOptions): Promise<LockHandle>;
  acquire(key: string | readonly string[], options: AcquireOptions = {}): Promise<LockHandle> {
    // No async layer (a bad key still rejects, as settled): every acquire comes here.
    return settled(() => {
      assertNoUpgrade(this, key, options);
      return isKeyList(key)
        ? acquireMany(this.engine, key, options).then(heldOrThrow)
        : acquireOne(this.engine, key, options);
    });
  }

  /**
   * Acquires `key` only if it is free right now; resolves `null` when busy (one round trip).
   *
   * @example
   * ```ts
   * const lock = await locks.tryAcquire('nightly-job');
   * if (!lock) return; // another instance runs it
   * ```
   * Given an array of keys: all of them if every one is free right now, else `null`.
   */
  tryAcquire(
    keys: readonly string[],
    options?: Omit<AcquireOptions, 'wait'>,
  ): Promise<MultiLockHandle | null>;
  tryAcquire(key: string, options?: Omit<AcquireOptions, 'wait'>): Promise<LockHandle | null>;
  async tryAcquire(
    key: string | readonly string[],
    options: Omit<AcquireOptions, 'wait'> = {},
  ): Promise<LockHandle | null> {
    assertNoUpgrade(this, key, options);
    if (isKeyList(key))
      return heldOrNull(await acquireMany(this.engine, key, { ...options, wait: 0 }));
    const outcome = await this.engine.acquire(
      lockRequest(this.engine, key, { ...options, wait: 0 }),
    );
    return 'lock' in outcome ? outcome.lock : null;
  }

  /**
   * Runs `fn` while holding `key`, renewing the lease while it runs, and always releases. If the
   * lock was lost meanwhile, `lock.signal` aborted at once and the call rejects with
   * `LockLostError` after `fn` settles (unless `onLost: 'log'`). `fn`'s own errors pass through.
   *
   * @example
   * ```ts
   * await locks.withLock(`report:${tenantId}`, async (lock) => {
   *   await step1();
   *   lock.signal.throwIfAborted();
   *   await step2(lock.fence);
   * });
   * ```
   * Given an array of keys, holds all of them (docs/multi-key.md):
   * `withLock([`account:${from}`, `account:${to}`], (lock) => move(lock.fences))`.
   */
  withLock<T>(
    keys: readonly string[],
    fn: (lock: MultiLockHandle) => T | Promise<T>,
    options?: WithLockOptions,
  ): Promise<T>;
  withLock<T>(
    key: string,
    fn: (lock: LockHandle) => T | Promise<T>,
    options?: WithLockOptions,
  ): Promise<T>;
  withLock<T>(
    key: string | readonly string[],
    fn: ((lock: LockHandle) => T | Promise<T>) | ((lock: MultiLockHandle) => T | Promise<T>),
    options: WithLockOptions = {},
  ): Promise<T> {
    // A hold's handle carries `keys` and `fences` whatever it holds.
    const run = fn as (lock: LockHandle) => T | Promise<T>;
    return runLocked(this, key, { ...options, onBusy: 'throw' }, run);
  }

  /**
   * Whether anyone holds `key` right now, in any way: a mutex or writer, a reader's share, a
   * semaphore permit — the same answer as `inspect(key).held`, from the same one script.
   */
  async isLocked(key: string): Promise<boolean> {
    assertLockKey(key, this.options.maxKeyLength);
    return this.engine.inspection.isLocked(key);
  }

  /**
   * Removes every holder of `key` — the mutex or writer, every reader's share, every semaphore
   * permit, in one atomic step — and wakes its waiters as a release does: for operators
   * un-sticking a lock. Fences keep increasing; fair queues keep their order. Each holder finds
   * out at its next renewal (`LockLostError` on its signal, a `'lost'` event). Resolves whether
   * anything was removed.
   */
  async forceRelease(key: string): Promise<boolean> {
    assertLockKey(key, this.options.maxKeyLength);
    return this.engine.inspection.forceRelease(key);
  }

  /**
   * {@link forceRelease} that resolves what it removed, or null when nobody held it. It takes no
   * kind: whichever holds the key goes (kinds on one key exclude each other). `removed` reports the
   * kind removed (`exclusive`, `read`, `semaphore`: its fence, how many held it, who); the
   * top-level `kind`, `fence`, `count` and `holder` (a mutex) or `holders` (readers, permits)
   * repeat the first of them, as {@link inspect} would have read the key.
   */
  async evict(key: string): Promise<EvictedLock | null> {
    assertLockKey(key, this.options.maxKeyLength);
    return this.engine.inspection.evict(key);
  }

  /**
   * Reads `key`'s lock without touching it, whatever its kind: whether it is held, the `kind`
   * (`'exclusive'`, `'read'` or `'semaphore'`), the lease left, the fence, and who holds it — the
   * mutex's `holder` (`instanceId`, since when), a read lock's `readers` (count, holders, writers
   * waiting), a semaphore's `semaphore` (limit, count, holders, fence) — and in fair mode who
   * queues. One atomic read of every kind on the key; a key held by several kinds at once (a read
   * lock and a semaphore) reads as the first of exclusive, read, semaphore, with each other kind
   * in `others` — all that `evict` would remove. On Redlock (exclusive locks only) a lock is held
   * only where a quorum of nodes agree.
   *
   * @example
   * ```ts
   * const { held, kind, holder, readers, semaphore } = await locks.inspect('nightly-job');
   * ```
   */
  async inspect(key: string): Promise<LockInfo> {
    assertLockKey(key, this.options.maxKeyLength);
    return this.engine.inspection.inspect(key);
  }

  /**
   * One page of the locks held under the prefix, of every kind (SCAN; every primary of a
   * Cluster), about `count` (default 100) of them, each as {@link inspect} reads it for its kind
   * (one entry per key: kinds on one key exclude each other). Pass the page's `cursor` back for the
   * next page; none means done. A lock held throughout is listed; one taken or freed meanwhile
   * may or may not be.
   *
   * @example
   * ```ts
   * let cursor: string | undefined;
   * do {
   *   const page = await locks.list({ cursor });
   *   page.locks.forEach((lock) => console.log(lock.key, lock.kind, lock.holder?.instanceId));
   *   cursor = page.cursor;
   * } while (cursor);
   * ```
   */
  async list(options: { cursor?: string; count?: number } = {}): Promise<LockListPage> {
    const count = options.count ?? 100;
    assertPositive('count', count);
    return this.engine.inspection.list(options.cursor, Math.ceil(count));
  }

  /**
   * Campaigns for `role`: at most one replica of every process that campaigns for it leads at a
   * time. Followers wait for the leader's release message (else retry when its lease would end);
   * the leader's lease is renewed by the watchdog, and its term — the lease's fence, strictly
   * increasing per role — ends (its `signal` aborts, then `onRevoked` runs) when renewal fails past
   * the lease, after a suspended host, at `termLimit`, on `resign()` or at shutdown (after the work
   * `run()` started). The campaign then goes on, after `rejoinDelay`. One campaign per role and
   * service: a second `lead()` of a running role throws `RedisLockConfigError` (see
   * {@link leadership}). Refused on Redlock. docs/leader-election.md.
   *
   * @example
   * ```ts
   * const scheduler = locks.lead('scheduler', {
   *   onElected: ({ term, signal }) => startPolling(term, signal),
   *   onRevoked: (reason) => logger.warn(`no longer the scheduler: ${reason}`),
   * });
   * await scheduler.run(({ term }) => runDueJobs(term)); // skipped unless leader
   * ```
   */
  lead(role: string, options: LeadOptions = {}): LeaderHandle {
    return this.leaders.lead(role, options);
  }

  /** This service's campaign for `role` (`lead()`, the `leaders` option, `@WhenLeader`), if any. */
  leadership(role: string): LeaderHandle | undefined {
    return this.leaders.get(role);
  }

  /**
   * Who leads `role`, from the store (every replica's view): the leader's instance id and since
   * when, the term, the lease left, and how many processes wait to lead. Changes nothing.
   */
  async inspectLeader(role: string): Promise<LeaderInfo> {
    assertLockKey(role, this.options.maxKeyLength);
    return leaderInfoOf(role, await this.engine.readLeader(role));
  }

  /**
   * Subscribes to lock lifecycle events, each with a typed payload (`LockEvents`):
   * `'acquired'` (key, fence, `waitedMs`, mode), `'busy'` (key, `waitedMs`, `retryAfterMs`),
   * `'released'` (key, fence, `heldMs`), `'renewal-failed'` (keys, error), `'elected'` and
   * `'revoked'` (role, term, and the reason a term ended), and `'lost'`: a lock
   * lost (renewal found it gone or foreign, Redis out of reach past its deadline, `maxHold`,
   * shutdown), or a re-entrant hold reaching its own `maxHold` (then `lock` is that hold's
   * handle). A payload is built only when its event has listeners. A listener that throws, or an
   * async one that rejects, is logged and never becomes an unhandled rejection or fails a lock
   * call; the other listeners still run.
   *
   * @example
   * ```ts
   * locks.on('acquired', ({ key, waitedMs }) => waits.observe(waitedMs));
   * locks.on('lost', (error, lock) => logger.error(`${lock.key}: ${error.reason}`));
   * ```
   */
  on<E extends LockEventName>(event: E, listener: LockEventListener<E>): this {
    this.engine.events.on(event, listener);
    return this;
  }

  /** Removes a listener `on()` added. */
  off<E extends LockEventName>(event: E, listener: LockEventListener<E>): this {
    this.engine.events.off(event, listener);
    return this;
  }

  /**
   * Shuts down: refuses new acquires at once (`LockServiceClosedError`), waits up to
   * `shutdownGrace` ms for held locks to be released by their work (still renewing them), aborts
   * the signal of each lock still held (`LockLostError`, reason `'shutdown'`, and a `'lost'`
   * event) and only then releases it — a leader resigns as soon as the work its `run()` started
   * has settled, so a follower takes over at once — and finally closes the connections this service opened.
   * Idempotent: every call returns the same promise.
   */
  close(): Promise<void> {
    // Leaders resign as their running work ends, while the drain below waits for their leases.
    void this.leaders.stopAll();
    return this.engine.close();
  }

  /**
   * Nest runs this after every `onModuleDestroy`, before the HTTP server stops and any
   * `onApplicationShutdown` (where clients such as TypeORM's close): held locks drain here, while
   * their work can still use those clients. Called by Nest, not by you.
   */
  beforeApplicationShutdown(): Promise<void> {
    void this.leaders.stopAll();
    return this.engine.drain();
  }

  /** Closes the connections last, after the drain. Called by Nest, not by you. */
  onApplicationShutdown(): Promise<void> {
    return this.close();
  }
}

// `@Locked` uses a LockService's locks directly, and anything else in its place (a test double)
// through the public API only.
markInternalLockSource(LockService.prototype);
