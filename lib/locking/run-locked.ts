import { Logger } from '@nestjs/common';
import { Observable, type Subscription } from 'rxjs';
import { monotonicNow } from '../engine/clock';
import type { HeldLock, LockHandle } from '../engine/lock-handle';
import { LockLostError } from '../errors/lock-lost.error';
import { LockNotAcquiredError } from '../errors/lock-not-acquired.error';
import type { LockService, WithLockOptions } from '../lock.service';
import type { OnBusyPolicy } from '../module/redis-lock-options';
import { frameWith, lockContext, type LockFrame } from './lock-context';

/** Options shared by `withLock`, `@Locked` on providers and `@Locked` on routes. */
export interface RunLockedOptions extends WithLockOptions {
  onBusy?: OnBusyPolicy;
}

const logger = new Logger('RedisLock');

/**
 * Holds `key` while `fn` runs: re-uses a lock this call chain already holds (re-entrancy),
 * otherwise acquires, runs `fn` in a frame that carries the lock, and always releases. `fn`'s own
 * errors pass through untouched; a lock lost while it ran becomes `LockLostError` after it settles.
 * Resolves `undefined` without running `fn` when busy and `onBusy` is `'skip'`.
 */
export async function runLocked<T>(
  locks: LockService,
  key: string,
  options: RunLockedOptions,
  fn: (lock: LockHandle) => T | Promise<T>,
): Promise<T> {
  const parent = lockContext.getStore();
  const reused = heldByChain(locks, key, options, parent);
  if (reused)
    return lockContext.run({ ...parent, held: parent!.held, current: reused }, () => fn(reused));

  const lock = await acquireOrSkip(locks, key, options);
  if (!lock) return undefined as T;
  let result: T;
  try {
    result = await lockContext.run(frameWith(parent, lock.redisKeys.lock, lock), () => fn(lock));
  } catch (error) {
    await releaseQuietly(lock);
    throw error;
  }
  const lost = await settle(lock);
  if (lost && (options.onLost ?? locks.options.onLost) === 'throw') throw lost;
  return result;
}

/**
 * The Observable form of `runLocked`, for handlers that return streams (SSE included): acquires
 * on subscribe, holds until the source completes, errors or the subscriber leaves, and releases at
 * once a lock granted after the subscriber left. `mapError` shapes lock failures only.
 */
export function observeLocked<T>(
  locks: LockService,
  key: string,
  options: RunLockedOptions,
  source: () => Observable<T>,
  mapError: (error: unknown) => unknown = (error) => error,
): Observable<T> {
  return new Observable<T>((subscriber) => {
    const parent = lockContext.getStore();
    const reused = heldByChain(locks, key, options, parent);
    if (reused) {
      return lockContext.run({ ...parent, held: parent!.held, current: reused }, () =>
        source().subscribe(subscriber),
      );
    }

    let lock: HeldLock | undefined;
    let inner: Subscription | undefined;
    let closed = false;
    // Cancels a waiting acquire when the subscriber leaves; a fail-fast one (wait 0) needs none,
    // and a grant that lands after the subscriber left is released below anyway.
    const waits = (options.wait ?? locks.options.wait) > 0;
    const leave = waits ? new AbortController() : undefined;
    const finish = async (error?: unknown, failed = false): Promise<void> => {
      const held = lock;
      lock = undefined;
      if (!held) return;
      const lost = await settle(held);
      if (failed) subscriber.error(error);
      else if (lost && (options.onLost ?? locks.options.onLost) === 'throw')
        subscriber.error(mapError(lost));
      else subscriber.complete();
    };

    const signal =
      options.signal && leave
        ? AbortSignal.any([options.signal, leave.signal])
        : (options.signal ?? leave?.signal);
    acquireOrSkip(locks, key, { ...options, signal }).then(
      (acquired) => {
        if (!acquired) return subscriber.complete();
        if (closed) return void releaseQuietly(acquired);
        lock = acquired;
        lockContext.run(frameWith(parent, acquired.redisKeys.lock, acquired), () => {
          try {
            inner = source().subscribe({
              next: (value) => subscriber.next(value),
              error: (error: unknown) => void finish(error, true),
              complete: () => void finish(),
            });
          } catch (error) {
            void finish(error, true);
          }
        });
      },
      (error: unknown) => {
        if (!closed) subscriber.error(mapError(error));
      },
    );

    return () => {
      closed = true;
      leave?.abort();
      inner?.unsubscribe();
      const held = lock;
      lock = undefined;
      if (held) void releaseQuietly(held);
    };
  });
}

function heldByChain(
  locks: LockService,
  key: string,
  options: RunLockedOptions,
  frame: LockFrame | undefined,
): LockHandle | undefined {
  if (!frame || !(options.reentrant ?? locks.options.reentrant)) return undefined;
  const held = frame.held.get(locks.engine.keysOf(key).lock);
  return held && held.owner === locks.engine && held.isHeld ? held : undefined;
}

async function acquireOrSkip(
  locks: LockService,
  key: string,
  options: RunLockedOptions,
): Promise<HeldLock | null> {
  try {
    return (await locks.acquire(key, options)) as HeldLock;
  } catch (error) {
    if (
      error instanceof LockNotAcquiredError &&
      (options.onBusy ?? locks.options.onBusy) === 'skip'
    ) {
      return null;
    }
    throw error;
  }
}

/**
 * Releases after the work settled; resolves the `LockLostError` if the work was not protected
 * to its end (lost before, or found lost by the release), else `undefined`.
 */
async function settle(lock: HeldLock): Promise<LockLostError | undefined> {
  const protectedToTheEnd = lock.isHeld && monotonicNow() <= lock.validUntil;
  const released = await releaseQuietly(lock);
  if (protectedToTheEnd && released !== false) return undefined;
  return lock.lost ?? new LockLostError(lock.key, 'deadline');
}

/**
 * A release that never throws: its failure must not mask the work's own result or error, and the
 * TTL frees the key anyway. Resolves `'unknown'` when Redis did not answer in time.
 */
function releaseQuietly(lock: HeldLock): Promise<boolean | 'unknown'> {
  return lock.release().catch((error: unknown) => {
    logger.warn(`Releasing lock "${lock.key}" failed (${String(error)}); it expires by its TTL.`);
    return 'unknown' as const;
  });
}
