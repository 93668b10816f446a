import type { LockEngine } from '../engine/lock-engine';
import type { LockHandle } from '../engine/lock-handle';
import type { LeaseKind } from '../keys/lease-kind';
import type { AcquireOptions } from '../options/lock-call-options';
import type { ResolvedRedisLockOptions } from '../options/redis-lock-options';

/**
 * Where `runLocked` and `observeLocked` take locks from: the part of `LockService` they use,
 * named here so the locking layer does not depend on the service built on top of it.
 */
export interface LockSource {
  /**
   * The module defaults a call falls back on (`wait`, `onBusy`, `onLost`, `reentrant`,
   * `minHold`), how much a failure's answer may tell (`errorDetails`) and at which level a busy
   * one is logged (`busyLogLevel`, `'verbose'` when a test double leaves it out).
   */
  readonly options: Pick<
    ResolvedRedisLockOptions,
    'wait' | 'onBusy' | 'onLost' | 'reentrant' | 'minHold' | 'errorDetails'
  > &
    Partial<Pick<ResolvedRedisLockOptions, 'busyLogLevel'>>;
  /**
   * The engine behind the locks: re-entrancy tells its holds apart from another source's by it,
   * keys a held lock by its Redis key, and times locked sections (`lifecycle`). Left out of the
   * published declarations, so `LockService` does not show it either.
   * @internal
   */
  readonly engine: {
    keysOf(key: string, kind?: LeaseKind): { readonly lock: string };
  } & Partial<Pick<LockEngine, 'lifecycle'>>;
  /** Acquires all of `keys` or none, or rejects with `LockNotAcquiredError`. */
  acquire(keys: readonly string[], options: AcquireOptions): Promise<LockHandle>;
  /** Acquires `key`, or rejects with `LockNotAcquiredError` when the wait runs out. */
  acquire(key: string, options: AcquireOptions): Promise<LockHandle>;
}

/** What a lock call locks: one key, or several taken together (all or none). */
export type LockTarget = string | readonly string[];

/** Whether a lock call was given several keys (an array) rather than one. */
export function isKeyList(key: LockTarget): key is readonly string[] {
  return Array.isArray(key);
}
