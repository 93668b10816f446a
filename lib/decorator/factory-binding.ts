import type { LockSource } from '../locking/lock-source';
import { bindLockSource, injectedLockSource, LOCK_SOURCE } from './locked-binding';
import { getLockedSpec } from './locked-spec';
import { providerSeenBy } from './module-lock-source';
import { replaceFactory, type InstanceWrapper } from '../nest-internals';

/** Marks a factory already wrapped (several explorers run when scoped modules are imported). */
const WRAPPED = Symbol('nestjs-redis-lock:binds-factory-results');

/** Whether instances of a prototype chain have `@Locked` methods, per prototype. */
const locking = new WeakMap<object, boolean>();

/**
 * A factory provider that Nest calls after bootstrap — per request, or per consumer when
 * transient — returns instances Nest injects nothing into. The factory is wrapped so that what it
 * returns, if it has `@Locked` methods, gets the LockService the factory's module sees: the one
 * property injection would have given it. A factory called once at bootstrap is bound by the
 * explorer instead, and runs unwrapped.
 */
export function bindFactoryResults(wrapper: InstanceWrapper): void {
  const factory: unknown = wrapper.metatype;
  const { host } = wrapper;
  if (!wrapper.inject || typeof factory !== 'function' || WRAPPED in factory || !host) return;
  if (wrapper.isDependencyTreeStatic() && !wrapper.isTransient) return;
  const bind = (built: unknown): unknown => {
    if (built && typeof built === 'object' && !injectedLockSource(built) && hasLocked(built)) {
      const locks = providerSeenBy(host, LOCK_SOURCE)?.instance as LockSource | undefined;
      if (locks) bindLockSource(built, locks);
    }
    return built;
  };
  const wrapped = function (this: unknown, ...args: unknown[]): unknown {
    const built: unknown = Reflect.apply(factory, this, args);
    // Any thenable, not only a native Promise: a factory may return another library's promise.
    const then = (built as { then?: unknown } | null)?.then;
    return typeof then === 'function' ? (built as PromiseLike<unknown>).then(bind) : bind(built);
  };
  // A transient factory's results for static consumers were built at bootstrap, before this wrap.
  if (wrapper.isTransient) {
    for (const made of wrapper.getStaticTransientInstances()) bind(made?.instance);
  }
  Object.defineProperty(wrapped, WRAPPED, { value: true });
  replaceFactory(wrapper, wrapped);
}

function hasLocked(instance: object): boolean {
  const prototype = Object.getPrototypeOf(instance) as object | null;
  if (!prototype) return false;
  let found = locking.get(prototype);
  if (found === undefined) {
    found = false;
    for (let at: object | null = prototype; at && at !== Object.prototype && !found;) {
      found = Object.getOwnPropertyNames(at).some((name) => {
        const value = Object.getOwnPropertyDescriptor(at, name)?.value as unknown;
        return typeof value === 'function' && getLockedSpec(value) !== undefined;
      });
      at = Object.getPrototypeOf(at) as object | null;
    }
    locking.set(prototype, found);
  }
  return found;
}
