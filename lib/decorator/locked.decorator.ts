import { UseInterceptors } from '@nestjs/common';
import { isObservable, Observable } from 'rxjs';
import { messages } from '../errors/messages';
import { RedisLockConfigError } from '../errors/redis-lock-config.error';
import { RedisLockError } from '../errors/redis-lock.error';
import { lockContext } from '../locking/lock-context';
import { observeLocked, runLocked } from '../locking/run-locked';
import {
  assertMaxHold,
  assertNonNegative,
  assertOneOf,
  assertPositive,
} from '../module/resolve-options';
import { assertKnownOptions } from '../module/known-options';
import { boundLockService } from './locked-binding';
import {
  createLockedSpec,
  keyFromArguments,
  LOCKED_METADATA,
  LOCKED_OPTION_NAMES,
  type LockedOptions,
  type LockedSpec,
  type LockKeyFactory,
} from './locked-spec';
import {
  defineResponseBinding,
  readResponseBinding,
  runHeldCall,
  type ResponseBinding,
} from './locked-response';
import { LockedInterceptor } from './locked.interceptor';

export type { LockedOptions, LockKeyFactory };

/**
 * A method `@Locked` can decorate: one that returns a `Promise` or an `Observable`. A locked call
 * has to wait for its lock, so a synchronous method would silently start returning a Promise;
 * the type makes that a compile error instead (`async` the method).
 */
export type LockableMethod = (...args: never[]) => Promise<unknown> | Observable<unknown>;

/** What `@Locked(...)` returns: a method decorator for {@link LockableMethod}s only. */
export type LockedMethodDecorator = <T extends LockableMethod>(
  target: object,
  propertyKey: string | symbol,
  descriptor: TypedPropertyDescriptor<T>,
) => void;

/**
 * Runs the method while holding a Redis lock on a key built from its arguments (providers) or
 * from the request (controller handlers), renewing the lease while it runs and releasing it after.
 *
 * - `'order:<userId>'` — `<name>` is a parameter name (provider) or a route param / query / body /
 *   user field (controller); dotted paths (`<dto.user.id>`, `<0.id>`, `<body.userId>`) reach inside.
 * - A function is the escape hatch: `(...args) => string` on providers, `(ctx) => string` on routes.
 * - A missing, null, empty or object value fails with `LockKeyError` (HTTP 400) — never a lock on
 *   `order:undefined`.
 * - Only methods that return a Promise or an Observable compile: a locked call waits for its lock,
 *   so a synchronous method (a route handler too) must be made `async`.
 * - Provider methods always return a Promise (they wait for the lock); methods declared to return
 *   `Observable` (a value import) hold the lock from subscribe until complete, error or
 *   unsubscribe. A method whose Observable return type the compiler did not record (an
 *   `import type`, an inferred type) runs its body under the lock and resolves to an Observable
 *   that holds the lock again from subscribe until it ends.
 *
 * @example
 * ```ts
 * @Locked('order:<userId>')
 * async createOrder(userId: string, voucherId: string) { … }
 *
 * @Post(':voucherId/orders')
 * @Locked('voucher:<voucherId>:user:<body.userId>', { wait: 2_000 })
 * create(@Param('voucherId') voucherId: string, @Body() dto: CreateOrderDto) { … }
 *
 * @Cron('0 * * * * *')
 * @Locked('settlement', { onBusy: 'skip' })   // runs on one replica per tick
 * async settle() { … }
 * ```
 */
export function Locked(
  key: string | LockKeyFactory,
  options: LockedOptions = {},
): LockedMethodDecorator {
  validateLockedOptions(options);
  return (target, propertyKey, descriptor) => {
    const where = `${describeTarget(target)}.${String(propertyKey)}`;
    assertKnownOptions(`@Locked() on ${where}`, options, LOCKED_OPTION_NAMES);
    if (typeof descriptor?.value !== 'function') {
      throw new RedisLockConfigError(messages.notAMethod(where));
    }
    const original = descriptor.value as unknown as (...args: unknown[]) => unknown;
    const returnsObservable =
      Reflect.getMetadata('design:returntype', target, propertyKey) === Observable;
    const spec = createLockedSpec(key, options, original, where, returnsObservable);
    const binding = readResponseBinding(target, propertyKey);
    const wrapper = lockedMethod(original, spec, binding);

    // Keep what decorators below this one stored on the original (@Get, @HttpCode, @Cron, …).
    for (const metadataKey of Reflect.getOwnMetadataKeys(original)) {
      Reflect.defineMetadata(metadataKey, Reflect.getOwnMetadata(metadataKey, original), wrapper);
    }
    Object.defineProperty(wrapper, 'name', { value: original.name });
    Object.defineProperty(wrapper, 'length', { value: original.length });
    Reflect.defineMetadata(LOCKED_METADATA, spec, wrapper);
    defineResponseBinding(wrapper, binding);
    // Mutate the descriptor (never return a new one), so decorators above see the wrapper.
    (descriptor as TypedPropertyDescriptor<unknown>).value = wrapper;
    UseInterceptors(LockedInterceptor)(target, propertyKey, descriptor as PropertyDescriptor);
  };
}

function lockedMethod(
  original: (...args: unknown[]) => unknown,
  spec: LockedSpec,
  binding: ResponseBinding,
) {
  const wrapper = function (this: unknown, ...args: unknown[]): unknown {
    const frame = lockContext.getStore();
    if (frame?.lockedByInterceptor === spec) {
      // A route: the interceptor already holds the lock for this very call. Matched by spec, not
      // by function: a wrapping decorator above this one (a tracing `@Span`) copies the spec onto
      // the function Nest calls, and then calls this wrapper with the same request. What the
      // handler returns (a promise, an ack to send) is recorded on the call, so the lock outlasts it.
      const inner = { ...frame, lockedByInterceptor: undefined, lockedCall: undefined };
      const run = (callArgs: unknown[]) =>
        lockContext.run(inner, () => original.apply(this, callArgs));
      return frame.lockedCall
        ? runHeldCall(frame.lockedCall, binding, spec.where, args, run)
        : run(args);
    }
    const locks = boundLockService(this);
    if (spec.returnsObservable) {
      if (!locks) throw new RedisLockError(messages.notBound(spec.where));
      const key = keyFromArguments(spec, args);
      return observeLocked(
        locks,
        key,
        spec.options,
        () => original.apply(this, args) as Observable<unknown>,
      );
    }
    return (async () => {
      if (!locks) throw new RedisLockError(messages.notBound(spec.where));
      const key = keyFromArguments(spec, args);
      const value = await runLocked(locks, key, spec.options, () => original.apply(this, args));
      // A stream the return type did not reveal (`import type { Observable }`, an inferred type):
      // the body ran under the lock; the stream's work, which starts on subscribe, holds it again.
      return isObservable(value) ? observeLocked(locks, key, spec.options, () => value) : value;
    })();
  };
  return wrapper;
}

function validateLockedOptions(options: LockedOptions): void {
  if (options.ttl !== undefined) assertPositive('ttl', options.ttl);
  if (options.wait !== undefined) assertNonNegative('wait', options.wait);
  if (options.maxHold !== undefined) assertMaxHold('maxHold', options.maxHold);
  if (options.onBusy !== undefined) assertOneOf('onBusy', options.onBusy, ['throw', 'skip']);
  if (options.onLost !== undefined) assertOneOf('onLost', options.onLost, ['throw', 'log']);
}

function describeTarget(target: object): string {
  return typeof target === 'function' ? target.name : target.constructor.name;
}
