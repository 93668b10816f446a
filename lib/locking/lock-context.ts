import { AsyncLocalStorage } from 'node:async_hooks';
import type { LockHandle } from '../engine/lock-handle';
import type { Hold } from './holds';

/** What the running async call chain holds. */
export interface LockFrame {
  /** This chain's hold of each lock it holds, by Redis key, for re-entrancy. */
  readonly held: ReadonlyMap<string, Hold>;
  /** The innermost hold; its lock is what `currentLock()` returns. */
  readonly hold?: Hold;
  /**
   * A `@Locked` route call whose interceptor has run: when Nest calls the method (matched by its
   * spec, which wrappers that copy the method's metadata share) with the arguments its pipes
   * produced, the method hands them to `run`, which takes the lock and runs the handler.
   */
  readonly lockedRoute?: LockedRoute;
}

/** A route call waiting for its handler's arguments to take its lock. */
export interface LockedRoute {
  readonly spec: object;
  /** Takes the call's lock, keyed from `args`, and runs `invoke(args)` under it. */
  readonly run: (args: unknown[], invoke: (args: unknown[]) => unknown) => unknown;
}

/**
 * Carries held locks down the async call chain. Only `run()` is used (never `enterWith()`), so a
 * frame never leaks into unrelated work. Key values are never read from here.
 */
export const lockContext: AsyncLocalStorage<LockFrame> = ((globalThis as Record<symbol, unknown>)[
  // One per process, shared by every copy of the package (as the LockService brand is), so a
  // second copy re-enters what the first holds. Versioned: bump it when the frame's shape changes,
  // so copies of incompatible versions keep separate frames.
  Symbol.for('nestjs-redis-lock:lock-context:1')
] ??= new AsyncLocalStorage<LockFrame>()) as AsyncLocalStorage<LockFrame>;

/**
 * The lock held by the running `@Locked` method or `withLock` callback, or `undefined` outside one
 * — also in a callback that outlived the call it was created in (a timer, a listener).
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
  const hold = lockContext.getStore()?.hold;
  return hold && !hold.settled ? hold.handle : undefined;
}

/**
 * Runs `fn` outside every lock the calling chain holds, and returns its result. Start long-lived
 * resources from a locked section with it — a poller, a socket, a queue consumer, a timer — so
 * their later callbacks do not share the section's locks (re-entrancy), and wait for a lock like
 * any other caller instead.
 *
 * @example
 * ```ts
 * @Locked('account:<id>')
 * async sync(id: string) {
 *   this.consumer ??= outsideLocks(() => this.queue.consume('events', (m) => this.apply(m)));
 *   …
 * }
 * ```
 */
export function outsideLocks<T>(fn: () => T): T {
  return lockContext.exit(fn);
}

/** A child frame whose innermost hold is `hold`. */
export function frameWith(parent: LockFrame | undefined, hold: Hold): LockFrame {
  const held = new Map(parent?.held);
  // A multi-key lock is found under each of its keys: a nested call on any of them joins it.
  for (const name of hold.lock.lockNames ?? [hold.lock.redisKeys.lock]) held.set(name, hold);
  return { held, hold };
}
