import type { ExecutionContext } from '@nestjs/common';
import { keyMessages } from '../errors/messages';
import { RedisLockConfigError } from '../errors/errors';
import { readPath, type Placeholder } from '../keys/key-template';
import type { Target } from './route-key-hints';
import type { RouteKeySpec } from './route-key-spec';
import type { HandlerKind, HandlerParameter, RequestSource } from './route-parameters';

/**
 * Reads one placeholder's value from the handler's (piped) arguments or, failing that, its call.
 * A resolver's readers read arguments only: a field resolver is called without a context.
 */
export type KeyReader = (args: readonly unknown[], context?: ExecutionContext) => unknown;

/**
 * The readers that read the call (its request or message) rather than the handler's arguments:
 * a route keyed by one of them needs the `ExecutionContext`, which only an interceptor is given.
 */
const callReaders = new WeakSet<KeyReader>();

/** Whether `reader` reads the call itself, not the handler's arguments (see `callReaders`). */
export function readsCall(reader: KeyReader): boolean {
  return callReaders.has(reader);
}

function fromCall(reader: KeyReader): KeyReader {
  callReaders.add(reader);
  return reader;
}

/** What planning one route reads from: its spec, its handler kind, parameters and path. */
export interface PlanContext {
  readonly spec: RouteKeySpec;
  readonly kind: HandlerKind;
  readonly parameters: readonly HandlerParameter[];
  readonly routeParams?: ReadonlySet<string>;
}

export function argumentReader({ parameter, path }: Target, rest: readonly string[]): KeyReader {
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
export function sourceReader(
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
  return fromCall((_args, context) =>
    readPath(context!.switchToHttp().getRequest<Record<string, unknown>>()[source], path),
  );
}

/** A message's payload: the handler's whole-payload parameter (piped) if any, else the message. */
export function payloadReader(path: readonly string[], plan: PlanContext): KeyReader {
  const whole = plan.parameters.find(
    (parameter) => parameter.source === 'payload' && !parameter.field,
  );
  if (whole) return (args) => readPath(args[whole.index], path);
  return fromCall((_args, context) =>
    readPath(
      context!.getType() === 'rpc'
        ? context!.switchToRpc().getData()
        : context!.switchToWs().getData(),
      path,
    ),
  );
}

const lower = ([first, ...rest]: readonly string[]): string[] =>
  first === undefined ? [] : [first.toLowerCase(), ...rest];
