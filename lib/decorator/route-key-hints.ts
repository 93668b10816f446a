import type { Placeholder } from '../keys/key-template';
import { closestName } from '../options/known-options';
import type { ParamBinding } from '../keys/param-names';
import type { HandlerParameter } from './route-parameters';

/**
 * What the bootstrap errors of a route's key plan say about a placeholder: the parameter it points
 * at, what an unknown name could have meant, whether the method's names could be read at all.
 */

/** A parameter a bare name points at, and the path inside it (names bound by destructuring). */
export interface Target {
  readonly parameter: HandlerParameter;
  readonly path: readonly string[];
}

export function describe({ parameter, path }: Target): string {
  const name = parameter.name ?? `argument ${parameter.index}`;
  return `${[name, ...path].join('.')} (${parameter.label})`;
}

/** True when the method's own parameter names are unknown: `(...args)` is a wrapper's signature. */
export function namesHidden(
  params: ReadonlyMap<string, ParamBinding> | undefined,
  parameters: readonly HandlerParameter[],
): boolean {
  const bindings = [...(params?.values() ?? [])];
  const [first] = bindings;
  const wrapped = bindings.length === 1 && first?.rest === true && first.index === 0;
  return parameters.length > 0 && (!params || wrapped);
}

/** What an unknown bare name on a route could have meant, most likely first. */
export function suggestions(
  path: Placeholder['path'],
  routeParams: ReadonlySet<string> | undefined,
  parameters: readonly HandlerParameter[],
): string[] {
  const dotted = path.join('.');
  const out: string[] = [];
  // A bare name a parameter answers to, one typo away (`<usrId>` for `@Param('userId') userId`).
  const names = parameters.flatMap((parameter) => [parameter.name, parameter.field]);
  const near = closestName(
    path[0],
    [...new Set(names)].filter((name) => name !== undefined),
  );
  if (near) out.push(`<${[near, ...path.slice(1)].join('.')}>`);
  if (!routeParams || routeParams.has(path[0])) out.push(`<params.${dotted}>`);
  out.push(`<body.${dotted}>`, `<query.${dotted}>`, `<user.${dotted}>`);
  for (const parameter of parameters) {
    const whole = parameter.custom || (parameter.source && !parameter.field);
    if (parameter.name && whole) out.push(`<${parameter.name}.${dotted}>`);
  }
  return out;
}
