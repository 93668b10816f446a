import { messages } from '../errors/messages';
import { RedisLockError } from '../errors/errors';
import type { LockTarget } from '../locking/lock-source';
import { atRoute } from '../transports/http/route-failure-site';
import { injectedLockSource } from './locked-binding';
import { keyFromHandlerArguments } from './route-key-plan';
import type { LockedSpec } from './locked-spec';
import { lockRouteCall } from './route-promise';

/**
 * `@Locked` routes that Nest calls without `LockedInterceptor` in this process (decided at
 * bootstrap, `direct-routes.ts`). Never unmarked: a route another app registered before keeps
 * being called so.
 */
const direct = new WeakSet<LockedSpec>();

export function markDirectRoute(spec: LockedSpec): void {
  direct.add(spec);
}

/** Whether a call of this method that no interceptor prepared is a route's, locked as one. */
export function isDirectRoute(spec: LockedSpec): boolean {
  return direct.has(spec);
}

/**
 * Locks a call of a route handler that no interceptor prepared: keyed from the arguments Nest
 * calls it with (after its pipes) by the plan checked at bootstrap for the instance's controller,
 * held as the interceptor's Promise form holds it (until the handler's promise settled and a
 * `StreamableFile` it resolved to was read, or destroyed when its response closed). Its lock
 * failures are thrown to Nest's exception handling as they are, carrying the route
 * (`atRoute`), so `LockExceptionFilter` answers them as the interceptor would; every other error
 * passes through untouched.
 *
 * @param handler the method, for a plan not made at bootstrap (an instance of another class).
 */
export function lockDirectRouteCall(
  spec: LockedSpec,
  instance: unknown,
  handler: object,
  args: unknown[],
  invoke: () => unknown,
): Promise<unknown> {
  const locks = injectedLockSource(instance);
  if (!locks) return Promise.reject(new RedisLockError(messages.notBound(spec.where)));
  const failed = (error: unknown) => atRoute(error, spec.where, locks.options);
  let key: LockTarget;
  try {
    key = keyOf(spec, args, (instance as object).constructor, handler);
  } catch (error) {
    return Promise.reject(failed(error));
  }
  // No response to watch: Nest ends or destroys a file's stream when the response is over.
  return lockRouteCall(locks, key, spec.options, invoke, undefined, failed);
}

function keyOf(spec: LockedSpec, args: unknown[], controller: object, handler: object): LockTarget {
  if (!spec.members) return keyFromHandlerArguments(spec, args, controller, handler);
  return spec.members.map((one) => keyFromHandlerArguments(one, args, controller, handler));
}
