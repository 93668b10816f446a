import { Inject, Optional } from '@nestjs/common';
import type { LockSource } from '../locking/lock-source';
import { lockSourceFor, type ServiceLockSource } from '../locking/public-lock-source';
import { NestMetadata } from '../nest-internals';

/**
 * The token `RedisLockModule` provides its `LockService` under (an alias of it) for `@Locked`.
 * From the global symbol registry: two copies of the package in one process (an ESM and a CJS
 * build) agree on it, where they would not on the `LockService` class.
 */
export const LOCK_SOURCE = Symbol.for('nestjs-redis-lock:lock-source');

/** The hidden property of an instance that Nest injects `LOCK_SOURCE` into. */
const INJECTED = Symbol.for('nestjs-redis-lock:injected-lock-source');

/**
 * Asks Nest to inject, into every instance of the class it creates (any scope, a lazily loaded
 * module, a testing module), the LockService its own module sees. Optional: an instance whose
 * module sees none is refused at bootstrap, or at call time when Nest creates it later. Subclasses
 * inherit the injection, so an override that calls `super` still locks.
 */
export function injectLockSource(prototype: object): void {
  const declared = (Reflect.getMetadata(NestMetadata.propertyDeps, prototype.constructor) ??
    []) as {
    key: string | symbol;
  }[];
  if (declared.some((dependency) => dependency.key === INJECTED)) return;
  Inject(LOCK_SOURCE)(prototype, INJECTED);
  Optional()(prototype, INJECTED);
}

/**
 * The LockService an instance was given, if any — a test double of it through its public API
 * (`lockSourceFor`).
 */
export function injectedLockSource(instance: unknown): ServiceLockSource | undefined {
  if (instance === null || typeof instance !== 'object') return undefined;
  const given = (instance as { [INJECTED]?: object | null })[INJECTED];
  return given ? lockSourceFor(given) : undefined;
}

/**
 * Gives an instance Nest did not construct (a factory's or a value provider's) the LockService
 * its module sees, which Nest injects into constructed instances only.
 */
export function bindLockSource(instance: object, locks: LockSource): void {
  Object.defineProperty(instance, INJECTED, { value: locks, configurable: true, writable: true });
}

/** The object Nest injected as the instance's LockService (a test double included), if any. */
export function injectedLockService(instance: unknown): object | undefined {
  if (instance === null || typeof instance !== 'object') return undefined;
  return (instance as { [INJECTED]?: object | null })[INJECTED] ?? undefined;
}
