import type { ParamBinding } from '../keys/param-names';
import { GqlParamType, HttpParamType, NestMetadata, PAYLOAD_PARAM_TYPE } from '../nest-internals';

/** What an HTTP handler's parameter decorators bind, by their `RouteParamtypes` number. */
const HTTP_TYPES: Record<number, { source?: RequestSource; label: string }> = {
  [HttpParamType.REQUEST]: { label: '@Req()' },
  [HttpParamType.BODY]: { source: 'body', label: '@Body' },
  [HttpParamType.QUERY]: { source: 'query', label: '@Query' },
  [HttpParamType.PARAM]: { source: 'params', label: '@Param' },
  [HttpParamType.HEADERS]: { source: 'headers', label: '@Headers' },
  [HttpParamType.SESSION]: { label: '@Session()' },
  [HttpParamType.FILE]: { label: '@UploadedFile()' },
  [HttpParamType.FILES]: { label: '@UploadedFiles()' },
  [HttpParamType.HOST]: { label: '@HostParam()' },
  [HttpParamType.IP]: { label: '@Ip()' },
  [HttpParamType.RAW_BODY]: { label: '@RawBody()' },
};
/** What a resolver's parameter decorators bind, by their `GqlParamtype` number. */
const GQL_TYPES: Record<number, string> = {
  [GqlParamType.ROOT]: '@Parent()',
  [GqlParamType.CONTEXT]: '@Context()',
  [GqlParamType.INFO]: '@Info()',
};

/** `@Res()` and `@Next()`: nothing a key can be read from. */
const HTTP_UNUSABLE = new Set<number>([HttpParamType.RESPONSE, HttpParamType.NEXT]);

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
  if (
    Reflect.hasMetadata(NestMetadata.method, handler) &&
    Reflect.hasMetadata(NestMetadata.path, handler)
  )
    return 'http';
  if (
    Reflect.hasMetadata(NestMetadata.pattern, handler) ||
    Reflect.hasMetadata(NestMetadata.messageMapping, handler)
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
    Reflect.getMetadata(NestMetadata.routeArgs, owner, method) ?? {};
  const parameters: HandlerParameter[] = [];
  for (const [key, arg] of Object.entries(metadata)) {
    const custom = key.includes(NestMetadata.customRouteArgs);
    const type = custom ? undefined : Number(key.split(':')[0]);
    const field = typeof arg.data === 'string' ? arg.data : undefined;
    const name = nameAt(names, arg.index);
    const base = { index: arg.index, field, name, custom };
    if (custom) {
      parameters.push({ ...base, label: 'a custom decorator' });
    } else if (kind === 'graphql') {
      // `@Args` is what the client sends; the rest (parent, context, info) a key may read by name.
      parameters.push(
        type === GqlParamType.ARGS
          ? { ...base, source: 'args', label: `@Args(${quote(field)})` }
          : { ...base, label: GQL_TYPES[type!] ?? 'a resolver parameter' },
      );
    } else if (kind === 'message') {
      // Any parameter but the payload (the socket, the context, an ack) is what the server hands
      // the handler: a key may read it by its name, and must never look for it in the message.
      parameters.push(
        type === PAYLOAD_PARAM_TYPE
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
  return Reflect.hasMetadata(NestMetadata.resolverType, handler) || isFieldResolver(handler);
}

/** A `@ResolveField()` method: Nest runs no interceptors for it unless told to. */
export function isFieldResolver(handler: object): boolean {
  return Reflect.getMetadata(NestMetadata.resolveField, handler) === true;
}

/** A `@Subscription()` method: it returns an event stream, not a resolver's work. */
export function isSubscription(handler: object): boolean {
  return Reflect.getMetadata(NestMetadata.resolverType, handler) === 'Subscription';
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
    Reflect.getMetadata(NestMetadata.path, controller) as unknown,
    Reflect.getMetadata(NestMetadata.path, handler) as unknown,
  ]) {
    for (const one of Array.isArray(path) ? path : [path ?? '']) {
      if (typeof one !== 'string') return undefined;
      // The pattern's one group is not optional, so every match has it.
      for (const match of one.matchAll(/[:*]([A-Za-z_$][\w$]*)/g)) found.add(match[1]!);
    }
  }
  return found;
}
