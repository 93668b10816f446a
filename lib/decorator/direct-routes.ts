import { HttpException, Injectable, type OnModuleDestroy } from '@nestjs/common';
import { ApplicationConfig, DiscoveryService, MetadataScanner } from '@nestjs/core';
import { lockSourceFor } from '../locking/public-lock-source';
import type { ResolvedRedisLockOptions } from '../options/redis-lock-options';
import { LockService } from '../service/lock.service';
import { LockExceptionFilter } from '../transports/lock-exception.filter';
import { globalRouteEnhancers, NestMetadata, type InstanceWrapper } from '../nest-internals';
import { markDirectRoute } from './direct-route-call';
import { injectedLockService, LOCK_SOURCE } from './locked-binding';
import { readResponseBinding } from './locked-response';
import { getLockedSpec, type LockedSpec } from './locked-spec';
import { LockedInterceptor } from './locked.interceptor';
import { providerSeenBy } from './module-lock-source';
import { keyedFromArguments } from './route-key-plan';
import { handlerKind } from './route-parameters';

/**
 * Which `@Locked` HTTP routes Nest calls without `LockedInterceptor`. Nest's interceptor chain
 * costs more per request than the lock itself (RxJS, two `AsyncResource.bind`), and a route whose
 * handler receives everything its key needs can be locked where Nest calls it (`lockedMethod`,
 * `direct-route-call.ts`). A route keeps the interceptor wherever the call without it could answer
 * or hold differently: the interceptor is the only part given the request and the response.
 */

/** Why a `@Locked` route keeps `LockedInterceptor`, or `undefined` when it needs none. */
export type InterceptedBecause =
  /** A message handler or a resolver too: those are locked by the interceptor. */
  | 'not only an HTTP route'
  /** A key function (it gets the `ExecutionContext`), or a placeholder read from the request. */
  | 'key read from the request'
  /** `@Res()` / `@Next()` without `passthrough`: held until the response is over. */
  | 'answers by itself'
  /** `@Sse()`, or declared to return an Observable: locked as a stream. */
  | 'streams'
  /** `@Render()` / `@Redirect()`: what it returns is not sent, so a file's stream is not ended. */
  | 'renders or redirects'
  /** `onBusy: 'skip'`: the interceptor shapes the skipped answer. */
  | 'skips when busy'
  /** The module's `exceptionFactory`, which is given the handler's `ExecutionContext`. */
  | 'exception factory'
  /**
   * Another interceptor on the method, the class or the app: it may give up on the call (a
   * timeout: the handler must then not run, a waiting acquire is cancelled) or answer in the
   * handler's place (a `StreamableFile` nobody sends then holds its key until the response is
   * over, which only the interceptor sees).
   */
  | 'other interceptors'
  /**
   * A filter of the user's (method, class or app) that catches every exception, `HttpException`
   * or a lock error: it sees the interceptor's `HttpException`, and would see the lock error.
   */
  | 'a filter of yours'
  /** No `LockExceptionFilter` to answer (`answerLockErrors: false`). */
  | 'no LockExceptionFilter';

/** One route as its lock is decided: the controller that serves it, its method, the app around. */
export interface RouteSetting {
  readonly spec: LockedSpec;
  /** The controller class, and the name and function of its method as Nest routes it. */
  readonly controller: object;
  readonly method: string;
  readonly handler: object;
  /** The options of the `LockService` the controller locks through. */
  readonly options: ResolvedRedisLockOptions;
  /** The app's global interceptors and filters (`globalRouteEnhancers`). */
  readonly globals: { readonly interceptors: unknown[]; readonly filters: unknown[] };
}

/**
 * Why the route keeps `LockedInterceptor`; `undefined` when locking it where Nest calls the
 * handler answers, logs and holds exactly as the interceptor would (see `InterceptedBecause`).
 */
export function interceptedBecause(route: RouteSetting): InterceptedBecause | undefined {
  const { spec, controller, handler, options, globals } = route;
  if (
    handlerKind(handler) !== 'http' ||
    Reflect.hasMetadata(NestMetadata.pattern, handler) ||
    Reflect.hasMetadata(NestMetadata.messageMapping, handler)
  ) {
    return 'not only an HTTP route';
  }
  if (!keyedFromArgumentsIfPlanned(spec, controller, handler)) return 'key read from the request';
  if (readResponseBinding(controller, route.method).sendsResponse) return 'answers by itself';
  if (spec.returnsObservable || Reflect.getMetadata(NestMetadata.sse, handler) === true) {
    return 'streams';
  }
  if (
    Reflect.hasMetadata(NestMetadata.render, handler) ||
    Reflect.hasMetadata(NestMetadata.redirect, handler)
  ) {
    return 'renders or redirects';
  }
  if ((spec.options.onBusy ?? options.onBusy) === 'skip') return 'skips when busy';
  if (options.exceptionFactory) return 'exception factory';
  const interceptors = [
    ...listed(NestMetadata.interceptors, handler).filter((one) => one !== LockedInterceptor),
    ...listed(NestMetadata.interceptors, controller),
    ...globals.interceptors,
  ];
  if (interceptors.length > 0) return 'other interceptors';
  const filters = [
    ...listed(NestMetadata.exceptionFilters, handler),
    ...listed(NestMetadata.exceptionFilters, controller),
    ...globals.filters,
  ];
  if (filters.some(catchesLockAnswers)) return 'a filter of yours';
  if (!filters.some(isLockExceptionFilter)) return 'no LockExceptionFilter';
  return undefined;
}

/**
 * Decides, for the routes whose controllers lock through this module's `LockService`, whether
 * Nest calls them with or without `LockedInterceptor`, and sets their interceptor lists so.
 * `RedisLockModule.configure()` runs it: the last moment before Nest registers routes, and the
 * first at which the app's global interceptors and filters are all known.
 *
 * The list belongs to the method, which every app of the process shares, and Nest reads it again
 * for each request of a request-scoped route: a route another running app needs the interceptor
 * on keeps it here too (locked correctly, at the interceptor's cost), until that app is closed.
 */
@Injectable()
export class DirectRoutes implements OnModuleDestroy {
  /** The route functions this app needs `LockedInterceptor` on (counted in `needed`). */
  private readonly needs: object[] = [];

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly config: ApplicationConfig,
    private readonly locks: LockService,
  ) {}

  choose(): void {
    const own = lockSourceFor(this.locks);
    const globals = globalRouteEnhancers(this.config);
    // By the function Nest calls: a method two controllers inherit is direct for both or neither.
    const verdicts = new Map<object, { spec: LockedSpec; direct: boolean }>();
    for (const wrapper of this.discovery.getControllers()) {
      const controller = wrapper.metatype;
      if (typeof controller !== 'function') continue;
      const prototype = controller.prototype as Record<string, unknown>;
      let locksThroughOwn: boolean | undefined;
      for (const method of this.scanner.getAllMethodNames(prototype)) {
        const handler = prototype[method];
        const spec = getLockedSpec(handler);
        if (!spec || handlerKind(handler as object) !== 'http') continue;
        // Scoped modules: each decides for the classes that lock through its own service.
        locksThroughOwn ??= lockSourceOf(wrapper) === own;
        if (!locksThroughOwn) break;
        const setting = { spec, controller, method, handler: handler as object };
        const direct = !interceptedBecause({ ...setting, options: own.options, globals });
        const known = verdicts.get(setting.handler);
        verdicts.set(setting.handler, { spec, direct: direct && (known?.direct ?? true) });
      }
    }
    for (const [handler, { spec, direct }] of verdicts) {
      if (direct && !needed.has(handler)) {
        removeLockedInterceptor(handler);
        markDirectRoute(spec);
      } else if (!direct) {
        needed.set(handler, (needed.get(handler) ?? 0) + 1);
        this.needs.push(handler);
        restoreLockedInterceptor(handler);
      }
    }
  }

  onModuleDestroy(): void {
    for (const handler of this.needs.splice(0)) {
      const count = (needed.get(handler) ?? 1) - 1;
      if (count > 0) needed.set(handler, count);
      else needed.delete(handler);
    }
  }
}

/** How many running apps of this process need `LockedInterceptor` on each route function. */
const needed = new WeakMap<object, number>();

/**
 * A route planned without error, keyed from its arguments. A template that cannot be planned keeps
 * the interceptor here: the explorer reports it, after closing what the module opened.
 */
function keyedFromArgumentsIfPlanned(spec: LockedSpec, controller: object, handler: object) {
  try {
    return keyedFromArguments(spec, controller, handler);
  } catch {
    return false;
  }
}

/** What the module sees of a controller's lock source: the one Nest injected, else its module's. */
function lockSourceOf(wrapper: InstanceWrapper): object | undefined {
  const injected = injectedLockService(wrapper.instance);
  if (injected) return lockSourceFor(injected);
  const seen = wrapper.host && providerSeenBy(wrapper.host, LOCK_SOURCE);
  const found = seen?.instance as object | null | undefined;
  return found ? lockSourceFor(found) : undefined;
}

/** The route functions an app of this process took `LockedInterceptor` from. */
const interceptorRemoved = new WeakSet<object>();

/** Takes `LockedInterceptor` off a direct route's interceptor list. */
function removeLockedInterceptor(handler: object): void {
  const list = listed(NestMetadata.interceptors, handler);
  const others = list.filter((one) => one !== LockedInterceptor);
  if (others.length === list.length) return;
  Reflect.defineMetadata(NestMetadata.interceptors, others, handler);
  interceptorRemoved.add(handler);
}

/** Puts `LockedInterceptor` back, last (as the explorer orders it), where an app took it off. */
function restoreLockedInterceptor(handler: object): void {
  const list = listed(NestMetadata.interceptors, handler);
  if (!interceptorRemoved.has(handler) || list.includes(LockedInterceptor)) return;
  Reflect.defineMetadata(NestMetadata.interceptors, [...list, LockedInterceptor], handler);
}

function listed(key: string, target: object): unknown[] {
  const list: unknown = Reflect.getMetadata(key, target);
  return Array.isArray(list) ? list : [];
}

/** `LockExceptionFilter` itself (not a subclass): it answers a route's lock failure as `@Locked`. */
function isLockExceptionFilter(filter: unknown): boolean {
  return filter === LockExceptionFilter || classOf(filter) === LockExceptionFilter;
}

/**
 * What a `@Locked` route's failure is, on its way to the filters: the lock error on a direct route,
 * the interceptor's `HttpException` on any other.
 */
const LOCK_ANSWERS: readonly unknown[] = [
  HttpException,
  ...((Reflect.getMetadata(NestMetadata.filterCatch, LockExceptionFilter) ?? []) as unknown[]),
];

/**
 * A filter that would catch a route's lock failure or its `HttpException`, as Nest matches them:
 * one whose `@Catch()` lists nothing (every exception), or a class either is an instance of.
 */
function catchesLockAnswers(filter: unknown): boolean {
  if (isLockExceptionFilter(filter)) return false;
  const type = classOf(filter);
  if (!type) return false;
  const caught: unknown = Reflect.getMetadata(NestMetadata.filterCatch, type);
  if (!Array.isArray(caught) || caught.length === 0) return true;
  return caught.some((one) => LOCK_ANSWERS.some((thrown) => isOrExtends(thrown, one)));
}

function isOrExtends(type: unknown, base: unknown): boolean {
  if (type === base) return true;
  if (typeof type !== 'function' || typeof base !== 'function') return false;
  return (type.prototype as object) instanceof base;
}

/** A filter's class: it is given as a class (`@UseFilters(MyFilter)`) or as an instance. */
function classOf(filter: unknown): object | undefined {
  if (typeof filter === 'function') return filter;
  if (typeof filter !== 'object' || filter === null) return undefined;
  return (filter as { constructor?: object }).constructor;
}
