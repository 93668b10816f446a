import type { ExecutionContext } from '@nestjs/common';
import { LockKeyError } from '../errors/lock-key.error';
import { messages } from '../errors/messages';
import {
  parseKeyTemplate,
  readPath,
  renderKeyTemplate,
  type KeyTemplate,
  type Placeholder,
} from '../keys/key-template';
import { readParamBindings, type ParamBinding } from '../keys/param-names';
import type { RunLockedOptions } from '../locking/run-locked';
import type { OptionNames } from '../module/known-options';

/**
 * A key function: on a provider method it receives the method's arguments; on a controller
 * handler it receives the Nest `ExecutionContext`. It must return a non-empty string.
 */
export type LockKeyFactory = (...args: never[]) => string;

/** Options of `@Locked()`; unset fields take the `RedisLockModule` defaults. */
export type LockedOptions = Omit<RunLockedOptions, 'signal'>;

/** Every `@Locked()` option name, so a misspelt one fails at class definition. */
export const LOCKED_OPTION_NAMES: OptionNames<LockedOptions> = {
  ttl: true,
  wait: true,
  renew: true,
  maxHold: true,
  onBusy: true,
  onLost: true,
  reentrant: true,
};

/** Everything `@Locked` knows about one method, computed once at decoration time. */
export interface LockedSpec {
  /** `Class.method`, for messages. */
  readonly where: string;
  readonly template?: KeyTemplate;
  readonly keyFactory?: LockKeyFactory;
  /** Parameter names → argument positions; `undefined` when the source could not be read. */
  readonly params?: ReadonlyMap<string, ParamBinding>;
  readonly options: LockedOptions;
  readonly returnsObservable: boolean;
}

export const LOCKED_METADATA = 'nestjs-redis-lock:locked';

/** Sources a controller placeholder may name explicitly; others are searched in this order. */
const HTTP_SOURCES = ['params', 'query', 'body', 'headers', 'user'] as const;
const HTTP_SEARCH_ORDER = ['params', 'query', 'body', 'user'] as const;
const PAYLOAD_SOURCES = ['data', 'payload'] as const;

export function createLockedSpec(
  key: string | LockKeyFactory,
  options: LockedOptions,
  method: (...args: never[]) => unknown,
  where: string,
  returnsObservable: boolean,
): LockedSpec {
  if (typeof key === 'function') return { where, keyFactory: key, options, returnsObservable };
  return {
    where,
    template: parseKeyTemplate(key),
    params: readParamBindings(method),
    options,
    returnsObservable,
  };
}

export function getLockedSpec(method: unknown): LockedSpec | undefined {
  return typeof method === 'function' ? Reflect.getMetadata(LOCKED_METADATA, method) : undefined;
}

/**
 * Checks, at bootstrap, that every placeholder of a provider method names a parameter (or an
 * argument index), so a typo fails the app's start rather than a request.
 */
export function assertProviderPlaceholders(spec: LockedSpec): void {
  if (!spec.template || checkedAgainstParams.has(spec)) return;
  for (const placeholder of spec.template.placeholders) {
    const root = placeholder.path[0];
    if (/^\d+$/.test(root)) continue;
    if (!spec.params || looksWrapped(spec.params)) {
      if (spec.params?.has(root)) continue;
      throw new LockKeyError(messages.paramNamesUnreadable(spec.where));
    }
    if (!spec.params.has(root)) {
      throw new LockKeyError(
        messages.unknownPlaceholder(spec.template.source, placeholder.text, spec.where, [
          ...spec.params.keys(),
        ]),
      );
    }
  }
  checkedAgainstParams.add(spec);
}

/** Specs whose placeholders were checked already (at bootstrap, or on a first call). */
const checkedAgainstParams = new WeakSet<LockedSpec>();

/** `(...args)` alone is what a wrapping decorator's function looks like: the real names are hidden. */
function looksWrapped(params: ReadonlyMap<string, ParamBinding>): boolean {
  const bindings = [...params.values()];
  return bindings.length === 1 && bindings[0].rest === true && bindings[0].index === 0;
}

/** The key of a provider-method call, from its arguments. */
export function keyFromArguments(spec: LockedSpec, args: unknown[]): string {
  if (spec.keyFactory)
    return checkFactoryKey(spec, (spec.keyFactory as (...a: unknown[]) => unknown)(...args));
  assertProviderPlaceholders(spec); // once per method: a plain `new`ed instance skipped bootstrap
  return renderKeyTemplate(spec.template!, (placeholder) => argumentValue(spec, args, placeholder));
}

function argumentValue(spec: LockedSpec, args: unknown[], placeholder: Placeholder): unknown {
  const [root, ...rest] = placeholder.path;
  if (/^\d+$/.test(root)) return readPath(args[Number(root)], rest);
  const binding = spec.params!.get(root)!;
  const base = binding.rest
    ? args.slice(binding.index)
    : readPath(args[binding.index], binding.path);
  return readPath(base, rest);
}

/** The key of a route/RPC/WebSocket call, from the request (or message payload). */
export function keyFromContext(spec: LockedSpec, context: ExecutionContext): string {
  if (spec.keyFactory)
    return checkFactoryKey(spec, (spec.keyFactory as (c: unknown) => unknown)(context));
  const type = context.getType<string>();
  if (type === 'http') {
    const request = context.switchToHttp().getRequest<Record<string, unknown>>();
    return renderKeyTemplate(spec.template!, (placeholder) => requestValue(request, placeholder));
  }
  const data = type === 'rpc' ? context.switchToRpc().getData() : context.switchToWs().getData();
  return renderKeyTemplate(spec.template!, ({ path }) =>
    (PAYLOAD_SOURCES as readonly string[]).includes(path[0])
      ? readPath(data, path.slice(1))
      : readPath(data, path),
  );
}

function requestValue(request: Record<string, unknown>, { path }: Placeholder): unknown {
  const [root, ...rest] = path;
  if ((HTTP_SOURCES as readonly string[]).includes(root) && rest.length > 0) {
    // Header names arrive lower-cased from Node's HTTP parser.
    const lookup =
      root === 'headers'
        ? rest.map((segment, i) => (i === 0 ? segment.toLowerCase() : segment))
        : rest;
    return readPath(request[root], lookup);
  }
  for (const source of HTTP_SEARCH_ORDER) {
    const value = readPath(request[source], path);
    if (value !== undefined) return value;
  }
  return undefined;
}

function checkFactoryKey(spec: LockedSpec, key: unknown): string {
  if (typeof key !== 'string' || key.length === 0) {
    throw new LockKeyError(
      messages.keyFunctionResult(
        spec.where,
        typeof key === 'string' ? 'an empty string' : String(key),
      ),
    );
  }
  return key;
}
