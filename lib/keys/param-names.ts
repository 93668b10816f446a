import { codeChars, stripComments } from './js-scan';

/**
 * Where a parameter name points: argument `index`, then `path` inside it (for names bound by
 * destructuring), or all arguments from `index` on (`rest`).
 */
export interface ParamBinding {
  readonly index: number;
  readonly path: readonly string[];
  readonly rest?: boolean;
}

/**
 * Reads a function's parameter names from its source, once, at decoration time — the only place
 * JavaScript keeps them. Handles defaults, rest parameters and object/array destructuring
 * (`({ id, user: { name } })` binds `id` → arg 0 `.id`, `name` → arg 0 `.user.name`).
 * Returns `undefined` when the source has no readable parameter list (a native or bound function).
 */
export function readParamBindings(
  fn: (...args: never[]) => unknown,
): Map<string, ParamBinding> | undefined {
  const list = paramList(stripComments(Function.prototype.toString.call(fn)));
  if (list === undefined) return undefined;
  const bindings = new Map<string, ParamBinding>();
  splitTopLevel(list).forEach((param, index) => bindPattern(param, index, [], bindings));
  return bindings;
}

/** The text between the parentheses of the parameter list (or a bare arrow parameter). */
function paramList(source: string): string | undefined {
  if (source.includes('[native code]')) return undefined;
  const open = source.indexOf('(');
  const arrow = source.indexOf('=>');
  if (arrow !== -1 && (open === -1 || arrow < open)) {
    return source
      .slice(0, arrow)
      .replace(/^\s*async\s+/, '')
      .trim();
  }
  if (open === -1) return undefined;
  let depth = 0;
  for (const { index, char } of codeChars(source, open)) {
    if ('([{'.includes(char)) depth++;
    else if (')]}'.includes(char) && --depth === 0) return source.slice(open + 1, index);
  }
  return undefined;
}

/** Splits on commas that are not nested in brackets or strings; drops empty entries (holes, trailing comma). */
function splitTopLevel(list: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (const { index, char } of codeChars(list)) {
    if ('([{'.includes(char)) depth++;
    else if (')]}'.includes(char)) depth--;
    else if (char === ',' && depth === 0) {
      parts.push(list.slice(start, index));
      start = index + 1;
    }
  }
  parts.push(list.slice(start));
  return parts.map((part) => part.trim());
}

/** Drops a top-level `= default`. */
function withoutDefault(param: string): string {
  let depth = 0;
  for (const { index, char } of codeChars(param)) {
    if ('([{'.includes(char)) depth++;
    else if (')]}'.includes(char)) depth--;
    else if (char === '=' && depth === 0 && param[index + 1] !== '>') {
      return param.slice(0, index).trim();
    }
  }
  return param.trim();
}

function bindPattern(
  raw: string,
  index: number,
  path: string[],
  bindings: Map<string, ParamBinding>,
): void {
  const param = withoutDefault(raw);
  if (!param) return;
  if (param.startsWith('...')) {
    // A rest parameter binds the remaining arguments as an array; nested rest is not addressable.
    if (path.length === 0) bindings.set(param.slice(3).trim(), { index, path, rest: true });
    return;
  }
  if (param.startsWith('{')) {
    for (const property of splitTopLevel(param.slice(1, -1))) {
      if (!property || property.startsWith('...')) continue;
      const colon = topLevelColon(property);
      if (colon === -1) {
        const name = withoutDefault(property);
        bindings.set(name, { index, path: [...path, name] });
      } else {
        const name = property
          .slice(0, colon)
          .trim()
          .replace(/^['"]|['"]$/g, '');
        bindPattern(property.slice(colon + 1), index, [...path, name], bindings);
      }
    }
    return;
  }
  if (param.startsWith('[')) {
    splitTopLevel(param.slice(1, -1)).forEach((element, position) =>
      bindPattern(element, index, [...path, String(position)], bindings),
    );
    return;
  }
  bindings.set(param, { index, path });
}

/** The `:` of `key: pattern`; a colon after a top-level `=` belongs to the default (`a = b ? 1 : 2`). */
function topLevelColon(property: string): number {
  let depth = 0;
  for (const { index, char } of codeChars(property)) {
    if ('([{'.includes(char)) depth++;
    else if (')]}'.includes(char)) depth--;
    else if (char === '=' && depth === 0) return -1;
    else if (char === ':' && depth === 0) return index;
  }
  return -1;
}
