import type { ApplicationConfig } from '@nestjs/core';
import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper';
import type { Module } from '@nestjs/core/injector/module';

/*
 * Everything this library relies on of Nest that is not Nest's public API, in one place: the
 * metadata keys its decorators write and the numbers they store, the injector's records we read,
 * and the one record we change. `compat/nest-internals.js` pins each of them on every supported
 * Nest major (10, 11, 12): a key that moved or changed meaning fails there, not in a user's app.
 *
 * The keys are written out, not imported: the packages that define most of them
 * (`@nestjs/microservices`, `@nestjs/websockets`, `@nestjs/graphql`, `@nestjs/schedule`) are
 * optional, and a deep import of `@nestjs/common/constants` breaks ESM builds of Nest.
 */

/** The metadata keys Nest's decorators write, by what they mean. */
export const NestMetadata = {
  /** `@UseInterceptors()` on a method: its interceptors, in order (`INTERCEPTORS_METADATA`). */
  interceptors: '__interceptors__',
  /** A handler's parameter decorators, `{ "<type>:<index>": { index, data } }` on (class, method). */
  routeArgs: '__routeArguments__',
  /** Part of a `routeArgs` entry's name when a `createParamDecorator()` decorator made it. */
  customRouteArgs: '__customRouteArgs__',
  /** `@Res({ passthrough: true })`: Nest still sends the handler's return value. */
  responsePassthrough: '__responsePassthrough__',
  /** `@Sse()` on a handler: `true`. */
  sse: '__sse__',
  /** `@Controller()` and `@Get()` & co.: the route path (a string, an array, or a RegExp). */
  path: 'path',
  /** `@Get()` & co.: the HTTP method of a route. */
  method: 'method',
  /** Property injections of a class (`@Inject()` on a property): `{ key, type }[]`. */
  propertyDeps: 'self:properties_metadata',
  /** `@MessagePattern()` / `@EventPattern()`: the handler's patterns. */
  pattern: 'microservices:pattern',
  /** `@MessagePattern()` / `@EventPattern()`: which of the two (see `EVENT_HANDLER_TYPE`). */
  patternHandler: 'microservices:handler_type',
  /** `@WebSocketGateway()` on a class: `true`. */
  gateway: 'websockets:is_gateway',
  /** `@SubscribeMessage()` on a method: `true`. */
  messageMapping: 'websockets:message_mapping',
  /** `@Query()`, `@Mutation()`, `@Subscription()`: `'Query'`, `'Mutation'`, `'Subscription'`. */
  resolverType: 'graphql:resolver_type',
  /** `@ResolveField()`: `true`. */
  resolveField: 'graphql:resolve_property',
  /** `@Cron()`, `@Interval()`, `@Timeout()` (`@nestjs/schedule`): the kind of job. */
  schedulerType: 'SCHEDULER_TYPE',
  /** `@UseFilters()` on a class or method: its exception filters, in order. */
  exceptionFilters: '__exceptionFilters__',
  /** `@Catch()` on a filter class: the exceptions it catches (none listed: every exception). */
  filterCatch: '__filterCatchExceptions__',
  /** `@Render()` on a handler: its template (Nest renders what the handler returns). */
  render: '__renderTemplate__',
  /** `@Redirect()` on a handler: `{ url, statusCode }` (Nest redirects instead of sending). */
  redirect: '__redirect__',
  /** `@Module()`'s lists on a module class. */
  moduleImports: 'imports',
  moduleProviders: 'providers',
  moduleExports: 'exports',
} as const;

/** `RouteParamtypes` of `@nestjs/common`: what an HTTP handler's parameter decorator binds. */
export const HttpParamType = {
  REQUEST: 0,
  RESPONSE: 1,
  NEXT: 2,
  BODY: 3,
  QUERY: 4,
  PARAM: 5,
  HEADERS: 6,
  SESSION: 7,
  FILE: 8,
  FILES: 9,
  HOST: 10,
  IP: 11,
  RAW_BODY: 12,
} as const;

/** `RpcParamtype.PAYLOAD` and `WsParamtype.PAYLOAD`: `@Payload()` and `@MessageBody()`. */
export const PAYLOAD_PARAM_TYPE = 3;

/** `WsParamtype.ACK`: `@Ack()`, a gateway handler's acknowledgement callback. */
export const WS_ACK_PARAM_TYPE = 13;

/** `GqlParamtype` of `@nestjs/graphql`: `@Parent()`, `@Context()`, `@Info()`, `@Args()`. */
export const GqlParamType = { ROOT: 0, CONTEXT: 1, INFO: 2, ARGS: 3 } as const;

/** `PatternHandler.EVENT`: an `@EventPattern()` handler (`MESSAGE`, 1, answers its caller). */
export const EVENT_HANDLER_TYPE = 2;

/**
 * The injector's record of a provider, and of a module (their `providers`, `imports`, `exports`,
 * `host`, `inject`, `isTransient`, `isDependencyTreeStatic()`, `getStaticTransientInstances()` are
 * what the explorer reads).
 */
export type { InstanceWrapper, Module as NestModule };

/**
 * Puts `filter` first of the app's global exception filters, where Nest consults it last (it tries
 * them from the last added to the first): the array `ApplicationConfig` hands out is the one the
 * exception handlers read, when they are built (after every provider was created).
 */
export function addFirstGlobalFilter(
  config: { getGlobalFilters(): unknown[] },
  filter: object,
  isOurs: (existing: unknown) => boolean,
): void {
  const globals = config.getGlobalFilters();
  if (!globals.some(isOurs)) globals.unshift(filter);
}

/**
 * The app's global interceptors and exception filters, as the routes registered after this call
 * will get them: the instances (`app.useGlobal*()`, `APP_*` providers), and the classes of
 * request-scoped `APP_*` providers, which Nest keeps as injector records and builds per request.
 *
 * Complete only from a module's `configure()` on: Nest calls it during `init()`, after it created
 * every provider and applied the `APP_*` ones and after the app's `useGlobal*()` calls, and
 * before it registers the routes, when it reads each route's interceptors and filters (once for a
 * static route, per request for a request-scoped one).
 */
export function globalRouteEnhancers(config: ApplicationConfig): {
  interceptors: unknown[];
  filters: unknown[];
} {
  return {
    interceptors: [
      ...config.getGlobalInterceptors(),
      ...config.getGlobalRequestInterceptors().map((wrapper) => wrapper.metatype),
    ],
    filters: [
      ...config.getGlobalFilters(),
      ...config.getGlobalRequestFilters().map((wrapper) => wrapper.metatype),
    ],
  };
}

/**
 * The one change we make to Nest's records: a factory provider's function, which the injector
 * calls through `metatype` each time it builds an instance (per request, per transient consumer).
 */
export function replaceFactory(wrapper: InstanceWrapper, factory: (...args: never[]) => unknown) {
  wrapper.metatype = factory as InstanceWrapper['metatype'];
}
