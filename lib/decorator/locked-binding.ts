import type { LockSource } from '../locking/lock-source';

/**
 * Each instance with `@Locked` methods gets its app's LockService at bootstrap (by the explorer),
 * so two Nest apps in one process each lock through their own module.
 */
const LOCK_SERVICE = Symbol('nestjs-redis-lock:service');

export function bindLockService(instance: object, locks: LockSource): void {
  Object.defineProperty(instance, LOCK_SERVICE, {
    value: locks,
    configurable: true,
    enumerable: false,
  });
}

export function boundLockService(instance: unknown): LockSource | undefined {
  if (instance === null || typeof instance !== 'object') return undefined;
  return (instance as { [LOCK_SERVICE]?: LockSource })[LOCK_SERVICE];
}
