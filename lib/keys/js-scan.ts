/**
 * Just enough of a JavaScript lexer to read a parameter list from `Function.prototype.toString()`:
 * it finds where strings, template literals, regular expressions and comments end, so commas,
 * brackets and `=` inside them are not taken for the list's own. A `/` starts a regex where an
 * expression may start (after an operator, an opening bracket, a comma or a keyword such as
 * `typeof`), and is a division after a value (a name, a number, `)`, `]`, `}` or a literal).
 */

/** Keywords after which a `/` starts a regular expression rather than a division. */
const BEFORE_EXPRESSION = new Set([
  'await',
  'case',
  'delete',
  'do',
  'else',
  'in',
  'instanceof',
  'new',
  'of',
  'return',
  'throw',
  'typeof',
  'void',
  'yield',
]);

const WORD = /[\p{ID_Continue}$\u200c\u200d]/u;
const SPACE = /\s/;

/** One character of the source outside any string, template, regex or comment. */
export interface CodeChar {
  readonly index: number;
  readonly char: string;
}

/**
 * The punctuation of `source` (brackets, commas, operators), skipping whitespace, names, numbers,
 * strings, template literals, regular expressions and comments. Stops at an unterminated token,
 * so a truncated source yields less rather than misplaced characters.
 */
export function* codeChars(source: string, from = 0, to = source.length): Generator<CodeChar> {
  for (const piece of pieces(source, from, to)) {
    if (piece.kind === 'code') yield { index: piece.index, char: source.charAt(piece.index) };
  }
}

/** Replaces comments with a space, leaving strings, templates and regexes as they are. */
export function stripComments(source: string): string {
  let out = '';
  let copied = 0;
  for (const piece of pieces(source, 0, source.length)) {
    if (piece.kind !== 'comment') continue;
    out += source.slice(copied, piece.index) + ' ';
    copied = piece.end + 1;
  }
  return out + source.slice(copied);
}

interface Piece {
  readonly index: number;
  readonly end: number;
  readonly kind: 'code' | 'comment';
}

function* pieces(source: string, from: number, to: number): Generator<Piece> {
  /** What came last: '' (nothing yet), a punctuation character, 'value', or a keyword. */
  let previous = '';
  for (let i = from; i < to; i++) {
    const char = source.charAt(i);
    if (SPACE.test(char)) continue;
    if (WORD.test(char)) {
      let end = i;
      while (end + 1 < to && WORD.test(source.charAt(end + 1))) end++;
      const word = source.slice(i, end + 1);
      // After a dot a keyword is a property name (`x.return / 2`): a value.
      previous = previous !== '.' && BEFORE_EXPRESSION.has(word) ? word : 'value';
      i = end;
      continue;
    }
    const end = tokenEnd(source, i, to, regexMayStart(previous));
    if (end === -1) return;
    if (end === undefined) {
      previous = char;
      yield { index: i, end: i, kind: 'code' };
    } else {
      if (isComment(source, i)) yield { index: i, end, kind: 'comment' };
      else previous = 'value';
      i = end;
    }
  }
}

function isComment(source: string, i: number): boolean {
  return source.charAt(i) === '/' && (source.charAt(i + 1) === '/' || source.charAt(i + 1) === '*');
}

function regexMayStart(previous: string): boolean {
  return previous !== 'value' && !')]}'.includes(previous || 'x');
}

/**
 * If a string, template, regex or comment starts at `i`: the index of its last character (-1 when
 * it is not terminated before `to`). Otherwise undefined.
 */
function tokenEnd(
  source: string,
  i: number,
  to: number,
  regexAllowed: boolean,
): number | undefined {
  const char = source.charAt(i);
  if (char === '"' || char === "'") return quotedEnd(source, i, to);
  if (char === '`') return templateEnd(source, i, to);
  if (char !== '/') return undefined;
  if (source.charAt(i + 1) === '/') {
    const newline = source.indexOf('\n', i + 2);
    return newline === -1 || newline >= to ? to - 1 : newline - 1;
  }
  if (source.charAt(i + 1) === '*') {
    const close = source.indexOf('*/', i + 2);
    return close === -1 || close + 1 >= to ? -1 : close + 1;
  }
  return regexAllowed ? regexEnd(source, i, to) : undefined;
}

function quotedEnd(source: string, start: number, to: number): number {
  for (let i = start + 1; i < to; i++) {
    if (source.charAt(i) === '\\') i++;
    else if (source.charAt(i) === source.charAt(start)) return i;
    else if (source.charAt(i) === '\n') return -1;
  }
  return -1;
}

/** A template literal, with its `${…}` expressions (which may hold templates of their own). */
function templateEnd(source: string, start: number, to: number): number {
  for (let i = start + 1; i < to; i++) {
    if (source.charAt(i) === '\\') i++;
    else if (source.charAt(i) === '`') return i;
    else if (source.charAt(i) === '$' && source.charAt(i + 1) === '{') {
      let depth = 0;
      let close = -1;
      for (const { index, char } of codeChars(source, i + 1, to)) {
        if (char === '{') depth++;
        else if (char === '}' && --depth === 0) {
          close = index;
          break;
        }
      }
      if (close === -1) return -1;
      i = close;
    }
  }
  return -1;
}

/** A regex literal: `/` … `/` and its flags; a `/` inside a class `[…]` does not end it. */
function regexEnd(source: string, start: number, to: number): number {
  let inClass = false;
  for (let i = start + 1; i < to; i++) {
    const char = source.charAt(i);
    if (char === '\\') i++;
    else if (char === '\n') return -1;
    else if (inClass) inClass = char !== ']';
    else if (char === '[') inClass = true;
    else if (char === '/') {
      while (i + 1 < to && WORD.test(source.charAt(i + 1))) i++;
      return i;
    }
  }
  return -1;
}
