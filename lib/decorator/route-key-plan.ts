import type { ExecutionContext } from '@nestjs/common';
import { keyMessages } from '../errors/messages';
import { RedisLockConfigError } from '../errors/errors';
import { readPath, renderKeyTemplate, type Placeholder } from '../keys/key-template';
import { describe, namesHidden, suggestions, type Target } from './route-key-hints';
import {
  argumentReader,
  payloadReader,
  readsCall,
  sourceReader,
  type KeyReader,
  type PlanContext,
} from './route-key-readers';
import type { RouteKeySpec } from './route-key-spec';
import {
  handlerKind,
  handlerParameters,
  REQUEST_SOURCES,
  routeParams,
  type HandlerKind,
} from './route-parameters';

export type { RouteKeySpec } from './route-key-spec';

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
 * Whether an HTTP route's key is read from its handler's (piped) arguments alone — no key function,
 * no placeholder that falls back to the request (`<headers.x>`, `<user.x>` that no parameter
 * supplies) — so that it can be keyed where Nest calls the handler, without the request. Plans the
 * route, so a template that cannot be planned throws `RedisLockConfigError`.
 */
export function keyedFromArguments(
  spec: RouteKeySpec,
  controller: object,
  handler: object,
): boolean {
  if (spec.members) {
    return spec.members.every((one) => keyedFromArguments(one, controller, handler));
  }
  if (!spec.template) return false;
  const plan = planFor(spec, 'http', controller, handler);
  for (const reader of plan.values()) if (readsCall(reader)) return false;
  return true;
}

/**
 * The key of an HTTP route call from its handler's arguments alone, for a route that is
 * `keyedFromArguments`: the plan checked at bootstrap for `controller`, without the request.
 */
export function keyFromHandlerArguments(
  spec: RouteKeySpec,
  args: readonly unknown[],
  controller: object,
  handler: object,
): string {
  const plan = planFor(spec, 'http', controller, handler);
  return renderKeyTemplate(spec.template!, (placeholder) => plan.get(placeholder)!(args));
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
