import { Logger, UseInterceptors } from '@nestjs/common';
import { isObservable, Observable } from 'rxjs';
import { messages } from '../errors/messages';
import { RedisLockConfigError, RedisLockError } from '../errors/errors';
import { lockContext } from '../locking/lock-context';
import { observeLocked, runLocked } from '../locking/run-locked';
import {
  assertHoldBounds,
  assertLease,
  assertMaxHold,
  assertNonNegative,
  assertOneOf,
} from '../options/resolve-options';
import { assertKnownOptions } from '../options/known-options';
import { assertExclusiveOnly } from '../options/multi-key-options';
import { leaseKindOf } from '../options/permits-option';
import { assertReadWriteOptions } from '../options/read-write-options';
import type { LockedOptions } from '../options/lock-call-options';
import { isDirectRoute, lockDirectRouteCall } from './direct-route-call';
import { resolverMethod, runResolverLocked } from './graphql/locked-resolver';
import { injectedLockSource, injectLockSource } from './locked-binding';
import {
  createLockedSpec,
  keyFromArguments,
  LOCKED_METADATA,
  LOCKED_OPTION_NAMES,
  type LockedSpec,
  type LockKeyFactory,
} from './locked-spec';
import { defineResponseBinding, readResponseBinding } from './locked-response';
import { LockedInterceptor } from './locked.interceptor';

export type { LockedOptions, LockKeyFactory };

/**
 * A method `@Locked` can decorate: one that returns a `Promise` or an `Observable`. A locked call
 * has to wait for its lock, so a synchronous method would silently start returning a Promise;
 * the type makes that a compile error instead (`async` the method).
 */
export type LockableMethod = (...args: never[]) => Promise<unknown> | Observable<unknown>;

/**
 * What the compiler names when `@Locked` decorates a method that is not a {@link LockableMethod}:
 * the sentence is the type, so it is the first thing the error says after TS1241.
 */
export type LockedNeedsAsyncMethod =
  '@Locked needs a method that returns a Promise or an Observable: make the method async';

/**
 * What `@Locked(...)` returns: a method decorator for {@link LockableMethod}s only (any other
 * method's descriptor must be a {@link LockedNeedsAsyncMethod}, which none is).
 */
export type LockedMethodDecorator = <T>(
  target: object,
  propertyKey: string | symbol,
  descriptor: T extends LockableMethod ? TypedPropertyDescriptor<T> : LockedNeedsAsyncMethod,
) => void;

/**
 * Runs the method while holding a Redis lock on a key built from its arguments, renewing the lease
 * while it runs and releasing it after. On routes, microservice and gateway handlers the arguments
 * are those the handler receives, after pipes.
 *
 * - `'order:<userId>'` — `<name>` is a parameter: by its TypeScript name, or on a handler by the
 *   name its decorator gives it (`@Param('userId') id` answers to `<userId>` and `<id>`). On routes
 *   any other value names its source: `<params.x>`, `<query.x>`, `<body.x>`, `<headers.x>`,
 *   `<user.x>`. On GraphQL resolvers (queries, mutations, `@ResolveField`) `@Args('uid') userId`
 *   answers to `<uid>` and `<userId>`. Dotted paths (`<dto.user.id>`, `<0.id>`) reach inside.
 *   Checked at bootstrap.
 * - An array of templates, `['account:<from>', 'account:<to>']`, locks every key together: all
 *   or none, in one global order, never a deadlock (docs/multi-key.md). Each template is checked
 *   like a single one; exclusive locks only.
 * - A function is the escape hatch: `(...args) => string` on providers, `(ctx, args) => string` on
 *   handlers (the `ExecutionContext`, then the piped arguments). Returning an array of keys locks
 *   them together, as an array of templates does; `permits` or `mode: 'read'` with it is refused
 *   at the call.
 * - A missing, null, empty or object value fails with `LockKeyError` (HTTP 400) — never a lock on
 *   `order:undefined`.
 * - Only methods that return a Promise or an Observable compile: a locked call waits for its lock,
 *   so a synchronous method (a route handler too) must be made `async`. A build without the type
 *   check (SWC, tsx) is refused at decoration when the recorded return type is a primitive or an
 *   array, else at the method's first call (`RedisLockConfigError`, its lock released), and every
 *   call after it throws at once.
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
 *
 * @Locked('export:<tenantId>', { permits: 3 })  // up to 3 exports per tenant at once
 * async export(tenantId: string) { … }
 * ```
 */
export function Locked(
  key: string | readonly string[] | LockKeyFactory,
  options: LockedOptions = {},
): LockedMethodDecorator {
  validateLockedOptions(options);
  if (Array.isArray(key)) assertExclusiveOnly(options); // several keys: exclusive locks only
  return (target, propertyKey, given) => {
    const descriptor = given as TypedPropertyDescriptor<unknown> | undefined;
    const where = `${describeTarget(target)}.${String(propertyKey)}`;
    assertKnownOptions(`@Locked() on ${where}`, options, LOCKED_OPTION_NAMES);
    if (typeof descriptor?.value !== 'function') {
      throw new RedisLockConfigError(messages.notAMethod(where));
    }
    // A static method runs on the class, which no module's injector ever sees.
    if (typeof target === 'function') throw new RedisLockConfigError(messages.staticMethod(where));
    const original = descriptor.value as unknown as (...args: unknown[]) => unknown;
    const returnType: unknown = Reflect.getMetadata('design:returntype', target, propertyKey);
    // A build that skipped the type check (SWC) may still record a synchronous return type.
    if (SYNC_RETURN_TYPES.has(returnType)) {
      throw new RedisLockConfigError(
        messages.declaredSync(where, (returnType as { name: string }).name),
      );
    }
    const returnsObservable = returnType === Observable;
    const site = { owner: target.constructor, method: propertyKey, where };
    const spec = createLockedSpec(key, options, original, site, returnsObservable);
    const binding = readResponseBinding(target, propertyKey);
    const wrapper = lockedMethod(original, spec);

    // Keep what decorators below this one stored on the original (@Get, @HttpCode, @Cron, …).
    for (const metadataKey of Reflect.getOwnMetadataKeys(original)) {
      Reflect.defineMetadata(metadataKey, Reflect.getOwnMetadata(metadataKey, original), wrapper);
    }
    Object.defineProperty(wrapper, 'name', { value: original.name });
    Object.defineProperty(wrapper, 'length', { value: original.length });
    Reflect.defineMetadata(LOCKED_METADATA, spec, wrapper);
    defineResponseBinding(wrapper, binding);
    // Mutate the descriptor (never return a new one), so decorators above see the wrapper.
    descriptor.value = wrapper;
    UseInterceptors(LockedInterceptor)(target, propertyKey, descriptor as PropertyDescriptor);
    injectLockSource(target);
  };
}

/** Return types a compiler records that no Promise or Observable has. */
const SYNC_RETURN_TYPES = new Set<unknown>([Number, String, Boolean, Symbol, BigInt, Array]);

/** Methods whose first locked call returned synchronously: later calls throw at once. */
const synchronous = new WeakSet<LockedSpec>();
const logger = new Logger('RedisLock');

/**
 * Calls the body of a provider method under its lock and refuses a synchronous result: a build
 * without the type check (or without `design:returntype`) lets a synchronous method through, and
 * its callers would get a Promise they do not expect. Thrown inside the work, so the lock is
 * released as for any error of the body.
 */
function asyncResult(spec: LockedSpec, result: unknown, onSync: () => void): unknown {
  if (isObservable(result) || isThenable(result)) return result;
  synchronous.add(spec);
  onSync();
  const error = new RedisLockConfigError(messages.syncMethod(spec.where, describeValue(result)));
  logger.error(error.message);
  throw error;
}

function isThenable(value: unknown): boolean {
  return (
    (typeof value === 'object' || typeof value === 'function') &&
    value !== null &&
    typeof (value as { then?: unknown }).then === 'function'
  );
}

/** The kind of a value, never the value: it may hold request data. */
function describeValue(value: unknown): string {
  if (value === undefined) return 'undefined';
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  const type = typeof value;
  return type === 'object' ? 'an object' : `a ${type}`;
}

function lockedMethod(original: (...args: unknown[]) => unknown, spec: LockedSpec) {
  const wrapper = function (this: unknown, ...args: unknown[]): unknown {
    const route = lockContext.getStore()?.lockedRoute;
    if (route?.spec === spec) {
      // A route, RPC or gateway call its interceptor prepared: Nest calls this with the arguments
      // its pipes produced, and the lock is keyed from them. Matched by spec, not by function: a
      // wrapping decorator above this one (a tracing `@Span`) copies the spec onto the function
      // Nest calls, and then calls this wrapper with the same arguments.
      return route.run(args, (callArgs) => original.apply(this, callArgs));
    }
    // A route Nest calls without LockedInterceptor (decided at bootstrap, `direct-routes.ts`):
    // keyed from the same arguments, locked here.
    if (isDirectRoute(spec)) {
      return lockDirectRouteCall(spec, this, wrapper, args, () => original.apply(this, args));
    }
    // A GraphQL resolver no interceptor prepared (a field resolver): keyed as its handler kind.
    const resolver = resolverMethod(this, spec, wrapper);
    const locks = injectedLockSource(this);
    if (resolver) {
      return runResolverLocked(spec, this as object, resolver, locks, args, () =>
        original.apply(this, args),
      );
    }
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
    if (synchronous.has(spec)) {
      throw new RedisLockConfigError(messages.syncMethod(spec.where, 'a value'));
    }
    // A synchronous caller ignores the Promise of a synchronous method: the error log is its
    // report then, and no unhandled rejection follows. A caller that awaits still gets the error.
    const handled = () => void called.catch(() => undefined);
    const called: Promise<unknown> = (async () => {
      if (!locks) throw new RedisLockError(messages.notBound(spec.where));
      const key = keyFromArguments(spec, args);
      const value = await runLocked(locks, key, spec.options, () =>
        asyncResult(spec, original.apply(this, args), handled),
      );
      // A stream the return type did not reveal (`import type { Observable }`, an inferred type):
      // the body ran under the lock; the stream's work, which starts on subscribe, holds it again.
      return isObservable(value) ? observeLocked(locks, key, spec.options, () => value) : value;
    })();
    return called;
  };
  return wrapper;
}

function validateLockedOptions(options: LockedOptions): void {
  // One Redis's drift margin: a call on Redlock checks its own again.
  if (options.ttl !== undefined) assertLease('ttl', options.ttl);
  if (options.wait !== undefined) assertNonNegative('wait', options.wait);
  if (options.maxHold !== undefined) assertMaxHold('maxHold', options.maxHold);
  if (options.minHold !== undefined) {
    assertHoldBounds(options.minHold, options.maxHold ?? Infinity);
  }
  if (options.onBusy !== undefined) assertOneOf('onBusy', options.onBusy, ['throw', 'skip']);
  if (options.onLost !== undefined) assertOneOf('onLost', options.onLost, ['throw', 'log']);
  // `permits` a whole number >= 1, and never with a read-write option (checked before those, so
  // the message speaks of semaphores).
  leaseKindOf(options);
  assertReadWriteOptions(options);
}

function describeTarget(target: object): string {
  return typeof target === 'function' ? target.name : target.constructor.name;
}
