import { keyMessages, messages } from '../../errors/messages';
import { RedisLockConfigError, RedisLockError } from '../../errors/errors';
import type { LockSource } from '../../locking/lock-source';
import { runLocked } from '../../locking/run-locked';
import { toLockGraphQLError } from '../../transports/graphql/lock-graphql-error';
import { isLockFailure } from '../../transports/http/lock-http-exception';
import { logLockFailure } from '../../transports/shared/lock-failure-answer';
import { keyFromResolverCall, type LockedSpec } from '../locked-spec';
import { isResolverMethod, isSubscription } from '../route-parameters';

/**
 * Checks, at bootstrap, what only a GraphQL resolver can get wrong: a subscription cannot be
 * locked (its work is the events, not the call).
 */
export function assertLockableResolver(spec: LockedSpec, handler: object) {
  if (isSubscription(handler))
    throw new RedisLockConfigError(keyMessages.lockedSubscription(spec.where));
}

/**
 * The GraphQL resolver method `method` of `instance` is, if any: the function Nest calls, which a
 * decorator above `@Locked` may have wrapped (its metadata is then on the outer function).
 */
export function resolverMethod(
  instance: unknown,
  spec: LockedSpec,
  own: object,
): object | undefined {
  if (isResolverMethod(own)) return own;
  const outer: unknown =
    instance !== null && typeof instance === 'object'
      ? (instance as Record<string | symbol, unknown>)[spec.method]
      : undefined;
  return typeof outer === 'function' && isResolverMethod(outer) ? outer : undefined;
}

/**
 * Runs a resolver call that no interceptor prepared — a `@ResolveField` method, for which Nest
 * runs interceptors only with `fieldResolverEnhancers: ['interceptors']` — under its lock: keyed
 * from the arguments Nest called it with by the plan checked at bootstrap, held until its promise
 * settles, and a lock failure thrown as the GraphQL error its caller should see.
 */
export async function runResolverLocked(
  spec: LockedSpec,
  instance: object,
  handler: object,
  locks: LockSource | undefined,
  args: unknown[],
  invoke: () => unknown,
): Promise<unknown> {
  if (!locks) throw new RedisLockError(messages.notBound(spec.where));
  try {
    const key = keyFromResolverCall(spec, args, instance.constructor, handler);
    return await runLocked(locks, key, spec.options, invoke);
  } catch (error) {
    if (!isLockFailure(error)) throw error;
    const level = locks.options.busyLogLevel ?? 'verbose';
    logLockFailure(error, spec.where, 'with a GraphQL error', level);
    throw toLockGraphQLError(error, locks.options.errorDetails);
  }
}
