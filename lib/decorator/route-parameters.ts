import type { ParamBinding } from '../keys/param-names';

/**
 * Nest's own metadata (`@nestjs/common`, `@nestjs/microservices`, `@nestjs/websockets` constants),
 * read by name so the optional transports need not be installed.
 */
const ROUTE_ARGS_METADATA = '__routeArguments__';
const CUSTOM_ROUTE_ARGS = '__customRouteArgs__';
const PATH_METADATA = 'path';
const METHOD_METADATA = 'method';
const PATTERN_METADATA = 'microservices:pattern';
const WS_MESSAGE_HANDLER = 'websockets:message_mapping';
/** `@Query()`, `@Mutation()`, `@Subscription()` and `@ResolveField()` (`@nestjs/graphql`). */
const GQL_RESOLVER_TYPE = 'graphql:resolver_type';
const GQL_FIELD_RESOLVER = 'graphql:resolve_property';

/** `RouteParamtypes` (HTTP); `RpcParamtype.PAYLOAD` and `WsParamtype.PAYLOAD` are 3 as well. */
const HTTP_TYPES: Record<number, { source?: RequestSource; label: string }> = {
  0: { label: '@Req()' },
  3: { source: 'body', label: '@Body' },
  4: { source: 'query', label: '@Query' },
  5: { source: 'params', label: '@Param' },
  6: { source: 'headers', label: '@Headers' },
  7: { label: '@Session()' },
  8: { label: '@UploadedFile()' },
  9: { label: '@UploadedFiles()' },
  10: { label: '@HostParam()' },
  11: { label: '@Ip()' },
  12: { label: '@RawBody()' },
};
/** `GqlParamtype`: what a resolver's parameter decorators bind. */
const GQL_TYPES: Record<number, string> = { 0: '@Parent()', 1: '@Context()', 2: '@Info()' };
const GQL_ARGS = 3;

/** `@Res()` and `@Next()`: nothing a key can be read from. */
const HTTP_UNUSABLE = new Set([1, 2]);
const PAYLOAD = 3;

/** The parts of an HTTP request a template may name (`<body.userId>`). */
export const REQUEST_SOURCES = ['params', 'query', 'body', 'headers', 'user'] as const;
export type RequestSource = (typeof REQUEST_SOURCES)[number];

/**
 * The kind of call a handler serves: an HTTP route, a microservice / gateway message, or a
 * GraphQL resolver (a query, mutation or field resolver).
 */
export type HandlerKind = 'http' | 'message' | 'graphql';

/** One handler parameter Nest fills, as a key can read it. */
export interface HandlerParameter {
  readonly index: number;
  /** How it is bound, for messages: `@Param('userId')`, `@Body()`, `a custom decorator`. */
  readonly label: string;
  /**
   * The request part it reads (HTTP), `'payload'` (messages) or `'args'` (GraphQL's `@Args`);
   * none for custom decorators.
   */
  readonly source?: RequestSource | 'payload' | 'args';
  /** The field its decorator names (`'userId'` in `@Param('userId')`), if any. */
  readonly field?: string;
  /** Its TypeScript name, when the method's source could be read and it is not destructured. */
  readonly name?: string;
  readonly custom: boolean;
}

/**
 * `'http'` for a route, `'message'` for `@MessagePattern`/`@EventPattern`/`@SubscribeMessage`,
 * `'graphql'` for `@Query`/`@Mutation`/`@Subscription`/`@ResolveField`.
 */
export function handlerKind(handler: object): HandlerKind | undefined {
  if (isResolverMethod(handler)) return 'graphql';
  if (Reflect.hasMetadata(METHOD_METADATA, handler) && Reflect.hasMetadata(PATH_METADATA, handler))
    return 'http';
  if (
    Reflect.hasMetadata(PATTERN_METADATA, handler) ||
    Reflect.hasMetadata(WS_MESSAGE_HANDLER, handler)
  )
    return 'message';
  return undefined;
}

/**
 * The handler's parameters that Nest fills from the call, from its route-argument metadata, named
 * by their TypeScript names where `names` (read from the method's source) has them.
 */
export function handlerParameters(
  owner: object,
  method: string | symbol,
  kind: HandlerKind,
  names: ReadonlyMap<string, ParamBinding> | undefined,
): HandlerParameter[] {
  const metadata: Record<string, { index: number; data?: unknown }> =
    Reflect.getMetadata(ROUTE_ARGS_METADATA, owner, method) ?? {};
  const parameters: HandlerParameter[] = [];
  for (const [key, arg] of Object.entries(metadata)) {
    const custom = key.includes(CUSTOM_ROUTE_ARGS);
    const type = custom ? undefined : Number(key.split(':')[0]);
    const field = typeof arg.data === 'string' ? arg.data : undefined;
    const name = nameAt(names, arg.index);
    const base = { index: arg.index, field, name, custom };
    if (custom) {
      parameters.push({ ...base, label: 'a custom decorator' });
    } else if (kind === 'graphql') {
      // `@Args` is what the client sends; the rest (parent, context, info) a key may read by name.
      parameters.push(
        type === GQL_ARGS
          ? { ...base, source: 'args', label: `@Args(${quote(field)})` }
          : { ...base, label: GQL_TYPES[type!] ?? 'a resolver parameter' },
      );
    } else if (kind === 'message') {
      // Any parameter but the payload (the socket, the context, an ack) is what the server hands
      // the handler: a key may read it by its name, and must never look for it in the message.
      parameters.push(
        type === PAYLOAD
          ? { ...base, source: 'payload', label: `@Payload(${quote(field)})` }
          : { ...base, label: 'a transport parameter (socket, context)' },
      );
    } else if (!HTTP_UNUSABLE.has(type!)) {
      const known = HTTP_TYPES[type!];
      if (!known) continue;
      const label = known.source ? `${known.label}(${quote(field)})` : known.label;
      parameters.push({ ...base, source: known.source, label });
    }
  }
  return parameters.sort((a, b) => a.index - b.index);
}

/** A method Nest's GraphQL module resolves: a query, mutation, subscription or field resolver. */
export function isResolverMethod(handler: object): boolean {
  return Reflect.hasMetadata(GQL_RESOLVER_TYPE, handler) || isFieldResolver(handler);
}

/** A `@ResolveField()` method: Nest runs no interceptors for it unless told to. */
export function isFieldResolver(handler: object): boolean {
  return Reflect.getMetadata(GQL_FIELD_RESOLVER, handler) === true;
}

/** A `@Subscription()` method: it returns an event stream, not a resolver's work. */
export function isSubscription(handler: object): boolean {
  return Reflect.getMetadata(GQL_RESOLVER_TYPE, handler) === 'Subscription';
}

function nameAt(names: ReadonlyMap<string, ParamBinding> | undefined, index: number) {
  for (const [name, binding] of names ?? []) {
    if (binding.index === index && binding.path.length === 0 && !binding.rest) return name;
  }
  return undefined;
}

const quote = (field: string | undefined): string => (field === undefined ? '' : `'${field}'`);

/**
 * The `:name` (and `*name`) route params of a handler's path joined to its controller's, or
 * `undefined` when a path is not a string (a RegExp) and so cannot be read.
 */
export function routeParams(controller: object, handler: object): Set<string> | undefined {
  const found = new Set<string>();
  for (const path of [
    Reflect.getMetadata(PATH_METADATA, controller) as unknown,
    Reflect.getMetadata(PATH_METADATA, handler) as unknown,
  ]) {
    for (const one of Array.isArray(path) ? path : [path ?? '']) {
      if (typeof one !== 'string') return undefined;
      // The pattern's one group is not optional, so every match has it.
      for (const match of one.matchAll(/[:*]([A-Za-z_$][\w$]*)/g)) found.add(match[1]!);
    }
  }
  return found;
}
