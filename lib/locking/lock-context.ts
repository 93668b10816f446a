import { AsyncLocalStorage } from 'node:async_hooks';
import type { LockHandle } from '../engine/lock-handle';

/** What the running async call chain holds. */
export interface LockFrame {
  /** Locks held by this call chain, by Redis key, for re-entrancy. */
  readonly held: ReadonlyMap<string, LockHandle & { readonly owner: object }>;
  /** The innermost lock, returned by `currentLock()`. */
  readonly current?: LockHandle;
  /**
   * The `@Locked` method whose lock the interceptor already took for this request: when Nest calls
   * it, it runs straight through instead of locking again from its arguments.
   */
  readonly lockedByInterceptor?: object;
}

/**
 * Carries held locks down the async call chain. Only `run()` is used (never `enterWith()`), so a
 * frame never leaks into unrelated work. Key values are never read from here.
 */
export const lockContext = new AsyncLocalStorage<LockFrame>();

/**
 * The lock held by the running `@Locked` method or `withLock` callback, or `undefined` outside one.
 * Use it to pass `fence` to a store, to check `signal`, or to `extend()` a long step.
 *
 * @example
 * ```ts
 * @Locked('report:<tenantId>')
 * async build(tenantId: string) {
 *   const lock = currentLock()!;
 *   await this.reports.save(tenantId, data, { fence: lock.fence });
 * }
 * ```
 */
export function currentLock(): LockHandle | undefined {
  return lockContext.getStore()?.current;
}

/** A child frame that holds `lock` too. */
export function frameWith(
  parent: LockFrame | undefined,
  redisKey: string,
  lock: LockHandle & { readonly owner: object },
): LockFrame {
  const held = new Map(parent?.held);
  held.set(redisKey, lock);
  return { held, current: lock };
}
