import type { ExecutionContext } from '@nestjs/common';
import { keyMessages } from '../errors/key-messages';
import { RedisLockConfigError } from '../errors/redis-lock-config.error';
import {
  readPath,
  renderKeyTemplate,
  type KeyTemplate,
  type Placeholder,
} from '../keys/key-template';
import type { ParamBinding } from '../keys/param-names';
import { describe, namesHidden, suggestions, type Target } from './route-key-hints';
import {
  handlerKind,
  handlerParameters,
  REQUEST_SOURCES,
  routeParams,
  type HandlerKind,
  type HandlerParameter,
  type RequestSource,
} from './route-parameters';

/** What a route key is planned from: the part of `LockedSpec`, which imports this file. */
export interface RouteKeySpec {
  /** `Class.method`, for messages. */
  readonly where: string;
  readonly template?: KeyTemplate;
  /** `@Locked([...])`: one spec per key template. */
  readonly members?: readonly RouteKeySpec[];
  /** Parameter names → argument positions; `undefined` when the source could not be read. */
  readonly params?: ReadonlyMap<string, ParamBinding>;
  /** The class the method was declared on, and its name: where Nest keeps its parameter metadata. */
  readonly owner: object;
  readonly method: string | symbol;
}

/**
 * Reads one placeholder's value from the handler's (piped) arguments or, failing that, its call.
 * A resolver's readers read arguments only: a field resolver is called without a context.
 */
type KeyReader = (args: readonly unknown[], context?: ExecutionContext) => unknown;

/** Where each placeholder of a route's template is read, decided once per handler kind. */
type RoutePlan = ReadonlyMap<Placeholder, KeyReader>;

/**
 * Plans by method and by controller: a handler inherited by two controllers is checked against
 * each one's path (`<params.id>` may exist under one and not the other).
 */
const plans = new WeakMap<RouteKeySpec, WeakMap<object, Partial<Record<HandlerKind, RoutePlan>>>>();

/**
 * Checks, at bootstrap, that every placeholder of a controller or gateway handler resolves from
 * exactly one source, so a name that matches nothing, two parameters, or a route param the path
 * lacks stops the app's start. Throws `RedisLockConfigError`.
 */
export function assertRoutePlaceholders(spec: RouteKeySpec, controller: object, handler: object) {
  // `@Locked([...])`: each template is planned (and checked) on its own.
  for (const one of spec.members ?? []) assertRoutePlaceholders(one, controller, handler);
  const kind = handlerKind(handler);
  if (kind && spec.template) planFor(spec, kind, controller, handler);
}

/** The key of a route, RPC or WebSocket call, from the arguments its handler receives (piped). */
export function keyFromRouteArguments(
  spec: RouteKeySpec,
  args: readonly unknown[],
  context: ExecutionContext,
): string {
  const type = context.getType<string>();
  const kind: HandlerKind = type === 'http' || type === 'graphql' ? type : 'message';
  const plan = planFor(spec, kind, context.getClass(), context.getHandler());
  return renderKeyTemplate(spec.template!, (placeholder) => plan.get(placeholder)!(args, context));
}

/**
 * The key of a GraphQL resolver call that no interceptor prepared (a `@ResolveField` method), from
 * the arguments Nest called it with — the same plan, checked at bootstrap, as when one did.
 */
export function keyFromResolverArguments(
  spec: RouteKeySpec,
  args: readonly unknown[],
  resolver: object,
  handler: object,
): string {
  const plan = planFor(spec, 'graphql', resolver, handler);
  return renderKeyTemplate(spec.template!, (placeholder) => plan.get(placeholder)!(args));
}

function planFor(spec: RouteKeySpec, kind: HandlerKind, controller: object, handler: object) {
  let byController = plans.get(spec);
  if (!byController) plans.set(spec, (byController = new WeakMap()));
  const known = byController.get(controller) ?? {};
  if (known[kind]) return known[kind];
  const plan = new Map<Placeholder, KeyReader>();
  const parameters = handlerParameters(spec.owner, spec.method, kind, spec.params);
  const context: PlanContext = {
    spec,
    kind,
    parameters,
    routeParams: kind === 'http' ? routeParams(controller, handler) : undefined,
  };
  for (const placeholder of spec.template!.placeholders) {
    plan.set(placeholder, readerFor(placeholder, context));
  }
  byController.set(controller, { ...known, [kind]: plan });
  return plan;
}

interface PlanContext {
  readonly spec: RouteKeySpec;
  readonly kind: HandlerKind;
  readonly parameters: readonly HandlerParameter[];
  readonly routeParams?: ReadonlySet<string>;
}

function readerFor(placeholder: Placeholder, plan: PlanContext): KeyReader {
  const [root, ...rest] = placeholder.path;
  if (/^\d+$/.test(root)) return (args) => readPath(args[Number(root)], rest);
  const targets = targetsOf(root, plan);
  const fail = (message: string): never => {
    throw new RedisLockConfigError(message);
  };
  const { source: template } = plan.spec.template!;
  if (targets.length > 1) {
    fail(
      keyMessages.ambiguousPlaceholder(
        template,
        placeholder.text,
        plan.spec.where,
        targets.map(describe),
      ),
    );
  }
  const source = REQUEST_SOURCES.find((one) => one === root);
  const [field, ...more] = rest;
  if (plan.kind === 'http' && source && field !== undefined) {
    const named = targets[0];
    if (!named) return sourceReader(source, [field, ...more], placeholder, plan);
    // A parameter named like a source must read that very source, or the name says two things.
    const { parameter } = named;
    const same = parameter.custom
      ? source === 'user'
      : parameter.source === source && !parameter.field;
    if (!same) {
      fail(
        keyMessages.sourceConflict(template, placeholder.text, plan.spec.where, describe(named)),
      );
    }
  }
  const [only] = targets;
  if (targets.length === 1 && only) return argumentReader(only, rest);
  if (plan.kind === 'message')
    return payloadReader(root === 'data' || root === 'payload' ? rest : placeholder.path, plan);
  const known = plan.parameters.map((parameter) => describe({ parameter, path: [] }));
  const hidden = namesHidden(plan.spec.params, plan.parameters);
  // A resolver has no fallback to the operation's raw arguments: only bound parameters are read.
  if (plan.kind === 'graphql') {
    fail(
      keyMessages.unknownResolverPlaceholder(
        template,
        placeholder.text,
        plan.spec.where,
        known,
        hidden,
      ),
    );
  }
  const meant = suggestions(placeholder.path, plan.routeParams, plan.parameters);
  return fail(
    keyMessages.unknownRoutePlaceholder(
      template,
      placeholder.text,
      plan.spec.where,
      meant,
      known,
      hidden,
    ),
  );
}

/** Parameters a bare name matches: by TypeScript name, or by the name its decorator gives it. */
function targetsOf(root: string, plan: PlanContext): Target[] {
  const found = new Map<string, Target>();
  const at = (index: number) => plan.parameters.find((parameter) => parameter.index === index);
  for (const [name, binding] of plan.spec.params ?? []) {
    const parameter = at(binding.index);
    if (name !== root || binding.rest || !parameter) continue;
    found.set(`${binding.index}:${binding.path.join('.')}`, { parameter, path: binding.path });
  }
  for (const parameter of plan.parameters) {
    if (parameter.field === root && parameter.source) {
      found.set(`${parameter.index}:`, { parameter, path: [] });
    }
  }
  return [...found.values()].sort((a, b) => a.parameter.index - b.parameter.index);
}

function argumentReader({ parameter, path }: Target, rest: readonly string[]): KeyReader {
  const inside = [
    ...path,
    ...(parameter.source === 'headers' && !parameter.field ? lower(rest) : rest),
  ];
  return (args) => readPath(args[parameter.index], inside);
}

/**
 * `<body.x>`, `<query.x>`, `<params.x>`, `<headers.x>`: the handler's parameter bound to that
 * field (or to the whole source) when it has one — the value after its pipes — else the request
 * as it arrived. `<user.x>` reads `request.user`, which guards set.
 */
function sourceReader(
  source: RequestSource,
  [field, ...more]: readonly [string, ...string[]],
  placeholder: Placeholder,
  plan: PlanContext,
): KeyReader {
  const same = (name: string) =>
    source === 'headers' ? name.toLowerCase() === field.toLowerCase() : name === field;
  const bound = plan.parameters.filter((parameter) => parameter.source === source);
  const exact = bound.find((parameter) => parameter.field !== undefined && same(parameter.field));
  if (exact) return (args) => readPath(args[exact.index], more);
  if (source === 'params' && plan.routeParams && !plan.routeParams.has(field)) {
    throw new RedisLockConfigError(
      keyMessages.unknownRouteParam(plan.spec.template!.source, placeholder.text, plan.spec.where, [
        ...plan.routeParams,
      ]),
    );
  }
  const path = source === 'headers' ? [field.toLowerCase(), ...more] : [field, ...more];
  const whole = bound.find((parameter) => parameter.field === undefined);
  if (whole) return (args) => readPath(args[whole.index], path);
  return (_args, context) =>
    readPath(context!.switchToHttp().getRequest<Record<string, unknown>>()[source], path);
}

/** A message's payload: the handler's whole-payload parameter (piped) if any, else the message. */
function payloadReader(path: readonly string[], plan: PlanContext): KeyReader {
  const whole = plan.parameters.find(
    (parameter) => parameter.source === 'payload' && !parameter.field,
  );
  if (whole) return (args) => readPath(args[whole.index], path);
  return (_args, context) =>
    readPath(
      context!.getType() === 'rpc'
        ? context!.switchToRpc().getData()
        : context!.switchToWs().getData(),
      path,
    );
}

const lower = ([first, ...rest]: readonly string[]): string[] =>
  first === undefined ? [] : [first.toLowerCase(), ...rest];
