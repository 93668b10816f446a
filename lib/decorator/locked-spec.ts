import type { ExecutionContext } from '@nestjs/common';
import { LockKeyError, RedisLockConfigError } from '../errors/errors';
import { keyMessages } from '../errors/messages';
import {
  parseKeyTemplate,
  readPath,
  renderKeyTemplate,
  type KeyTemplate,
  type Placeholder,
} from '../keys/key-template';
import { readParamBindings, type ParamBinding } from '../keys/param-names';
import { keyFromResolverArguments, keyFromRouteArguments } from './route-key-plan';
import { closestName, type OptionNames } from '../options/known-options';
import type { LockedOptions } from '../options/lock-call-options';
import type { LockTarget } from '../locking/lock-source';
import { multiKeyTemplates } from './multi-key-templates';

/**
 * A key function: on a provider method it receives the method's arguments; on a controller or
 * gateway handler it receives the Nest `ExecutionContext` and then the arguments the handler
 * receives (after pipes). It returns a non-empty string, or a non-empty array of them: several
 * keys held together, all or none, as `@Locked([...])` holds them (exclusive locks only).
 */
export type LockKeyFactory = (...args: never[]) => string | readonly string[];

/** Every `@Locked()` option name, so a misspelt one fails at class definition. */
export const LOCKED_OPTION_NAMES: OptionNames<LockedOptions> = {
  ttl: true,
  wait: true,
  renew: true,
  maxHold: true,
  minHold: true,
  onBusy: true,
  onLost: true,
  reentrant: true,
  permits: true,
  mode: true,
  writerPriority: true,
};

/** Everything `@Locked` knows about one method, computed once at decoration time. */
export interface LockedSpec {
  /** `Class.method`, for messages. */
  readonly where: string;
  readonly template?: KeyTemplate;
  readonly keyFactory?: LockKeyFactory;
  /**
   * `@Locked([...])`: one spec per key template, each checked and rendered like a single one;
   * the call holds all of their keys together (all or none).
   */
  readonly members?: readonly LockedSpec[];
  /** Parameter names → argument positions; `undefined` when the source could not be read. */
  readonly params?: ReadonlyMap<string, ParamBinding>;
  readonly options: LockedOptions;
  readonly returnsObservable: boolean;
  /** The class the method was declared on, and its name: where Nest keeps its parameter metadata. */
  readonly owner: object;
  readonly method: string | symbol;
}

export const LOCKED_METADATA = 'nestjs-redis-lock:locked';

/** Where a method is declared: its class (`target.constructor`) and its name. */
export interface MethodSite {
  readonly owner: object;
  readonly method: string | symbol;
  readonly where: string;
}

export function createLockedSpec(
  key: string | readonly string[] | LockKeyFactory,
  options: LockedOptions,
  fn: (...args: never[]) => unknown,
  site: MethodSite,
  returnsObservable: boolean,
): LockedSpec {
  if (isTemplateList(key)) {
    const templates = multiKeyTemplates(key, options, site.where);
    const members = templates.map((one) =>
      createLockedSpec(one, options, fn, site, returnsObservable),
    );
    return { ...site, members, options, returnsObservable };
  }
  if (typeof key === 'function') return { ...site, keyFactory: key, options, returnsObservable };
  return {
    ...site,
    template: parseKeyTemplate(key),
    params: readParamBindings(fn),
    options,
    returnsObservable,
  };
}

function isTemplateList(
  key: string | readonly string[] | LockKeyFactory,
): key is readonly string[] {
  return Array.isArray(key);
}

export function getLockedSpec(method: unknown): LockedSpec | undefined {
  return typeof method === 'function' ? Reflect.getMetadata(LOCKED_METADATA, method) : undefined;
}

/**
 * Checks, at bootstrap, that every placeholder of a provider method names a parameter (or an
 * argument index), so a typo fails the app's start rather than a request.
 */
export function assertProviderPlaceholders(spec: LockedSpec): void {
  if (spec.members) return spec.members.forEach(assertProviderPlaceholders);
  if (!spec.template || checkedAgainstParams.has(spec)) return;
  for (const placeholder of spec.template.placeholders) {
    const root = placeholder.path[0];
    if (/^\d+$/.test(root)) continue;
    if (!spec.params || looksWrapped(spec.params)) {
      if (spec.params?.has(root)) continue;
      throw new RedisLockConfigError(keyMessages.paramNamesUnreadable(spec.where));
    }
    if (!spec.params.has(root)) {
      const known = [...spec.params.keys()];
      throw new RedisLockConfigError(
        keyMessages.unknownPlaceholder(
          spec.template.source,
          placeholder.text,
          spec.where,
          known,
          closestName(root, known),
        ),
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
  const [first] = bindings;
  return bindings.length === 1 && first?.rest === true && first.index === 0;
}

/** The key of a provider-method call, from its arguments. */
export function keyFromArguments(spec: LockedSpec, args: unknown[]): LockTarget {
  if (spec.members) return spec.members.map((one) => keyFromArguments(one, args) as string);
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

/**
 * The key of a route, RPC or WebSocket call, built from the arguments its handler receives (after
 * pipes); a key function gets the `ExecutionContext` and those arguments.
 */
export function keyFromRoute(
  spec: LockedSpec,
  args: readonly unknown[],
  context: ExecutionContext,
): LockTarget {
  if (spec.members) return spec.members.map((one) => keyFromRoute(one, args, context) as string);
  if (spec.keyFactory) {
    const factory = spec.keyFactory as (c: unknown, a: readonly unknown[]) => unknown;
    return checkFactoryKey(spec, factory(context, args));
  }
  return keyFromRouteArguments(spec, args, context);
}

/**
 * The key of a GraphQL resolver call that no interceptor prepared (a `@ResolveField` method
 * without `fieldResolverEnhancers`), from the arguments Nest called it with. There is no
 * `ExecutionContext` then: a key function gets `undefined` in its place.
 */
export function keyFromResolverCall(
  spec: LockedSpec,
  args: readonly unknown[],
  resolver: object,
  handler: object,
): LockTarget {
  if (spec.members) {
    return spec.members.map((one) => keyFromResolverCall(one, args, resolver, handler) as string);
  }
  if (spec.keyFactory) {
    const factory = spec.keyFactory as (c: undefined, a: readonly unknown[]) => unknown;
    return checkFactoryKey(spec, factory(undefined, args));
  }
  return keyFromResolverArguments(spec, args, resolver, handler);
}

/**
 * What a key function returned, checked: a non-empty string, or a non-empty array of them (a copy,
 * so the function's own array may change later). Anything else is a `LockKeyError` naming the
 * method; the length limit is checked by the acquire, as for any key.
 */
function checkFactoryKey(spec: LockedSpec, key: unknown): LockTarget {
  if (!Array.isArray(key)) {
    if (isKey(key)) return key;
    throw new LockKeyError(keyMessages.keyFunctionResult(spec.where, describeResult(key)));
  }
  const keys = key as unknown[];
  const bad = keys.findIndex((one) => !isKey(one));
  if (keys.length === 0 || bad >= 0) {
    const what = bad < 0 ? 'an empty array' : `an array holding ${describeResult(keys[bad])}`;
    throw new LockKeyError(keyMessages.keyFunctionResult(spec.where, what));
  }
  return [...(keys as string[])];
}

const isKey = (value: unknown): value is string => typeof value === 'string' && value.length > 0;

/** Names a bad result by its kind, never by its value: it may come from the request. */
function describeResult(value: unknown): string {
  if (value === undefined || value === null) return String(value);
  if (typeof value === 'string') return 'an empty string';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}
