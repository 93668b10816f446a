import type { ResolvedRedisLockOptions } from '../../options/redis-lock-options';
import { isLockFailure } from './lock-http-exception';

/**
 * The `@Locked` route a lock failure belongs to, carried from a route Nest calls without
 * `LockedInterceptor` to `LockExceptionFilter`, which then answers it exactly as the interceptor
 * would have: with the options of the service the route locks through, and a log line naming the
 * handler (`Class.method`) rather than the request's path, which is all a filter is given.
 */
export interface RouteFailureSite {
  /** `Class.method` of the handler. */
  readonly where: string;
  /** The options of the `LockService` the route locks through (`busyStatus`, `errorDetails`, …). */
  readonly options: ResolvedRedisLockOptions;
}

/** Held weakly, by the error: a failure nobody answers leaves nothing behind. */
const sites = new WeakMap<object, RouteFailureSite>();

/** Records where a lock failure happened (anything else is left alone), and returns it. */
export function atRoute(error: unknown, where: string, options: ResolvedRedisLockOptions): unknown {
  if (isLockFailure(error)) sites.set(error, { where, options });
  return error;
}

/** The route a lock failure was recorded at by `atRoute`, if any. */
export function routeOf(error: object): RouteFailureSite | undefined {
  return sites.get(error);
}
