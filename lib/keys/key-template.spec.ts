import { LockKeyError } from '../errors/errors';
import { parseKeyTemplate, readPath, renderKeyTemplate } from './key-template';

/** Renders `source` with `values[placeholder.text]`. */
function render(source: string, values: Record<string, unknown>): string {
  return renderKeyTemplate(parseKeyTemplate(source), (placeholder) => values[placeholder.text]);
}

describe('parseKeyTemplate', () => {
  it('splits literals and placeholders, with each placeholder path', () => {
    const template = parseKeyTemplate('voucher:<voucherId>:user:<body.userId>');
    expect(template.parts).toEqual([
      'voucher:',
      { text: 'voucherId', path: ['voucherId'], escape: ':' },
      ':user:',
      { text: 'body.userId', path: ['body', 'userId'], escape: '' },
    ]);
    expect(template.placeholders.map((placeholder) => placeholder.text)).toEqual([
      'voucherId',
      'body.userId',
    ]);
  });

  it('reads dotted paths and argument indexes', () => {
    expect(parseKeyTemplate('<dto.user.id>').placeholders[0]!.path).toEqual(['dto', 'user', 'id']);
    expect(parseKeyTemplate('<0.id>').placeholders[0]!.path).toEqual(['0', 'id']);
    expect(parseKeyTemplate('<items.2>').placeholders[0]!.path).toEqual(['items', '2']);
  });

  it('accepts $, _ and - in names, and spaces around the placeholder text', () => {
    expect(parseKeyTemplate('<$a_b-c>').placeholders[0]!.path).toEqual(['$a_b-c']);
    expect(parseKeyTemplate('k:< userId >').placeholders[0]!.text).toBe('userId');
  });

  it('accepts a template without placeholders (one global lock)', () => {
    const template = parseKeyTemplate('nightly-settlement');
    expect(template.placeholders).toEqual([]);
    expect(renderKeyTemplate(template, () => undefined)).toBe('nightly-settlement');
  });

  it('sets each placeholder escape to the first character of the literal after it', () => {
    const [a, b, c] = parseKeyTemplate('<a>/<b>#x<c>').placeholders;
    expect([a!.escape, b!.escape, c!.escape]).toEqual(['/', '#', '']);
  });

  it('gives the last placeholder no escape: the text after it cannot be mistaken for its value', () => {
    const [id] = parseKeyTemplate('order:<id>:items').placeholders;
    expect(id!.escape).toBe('');
    const [a, b] = parseKeyTemplate('<a>:<b>:tail').placeholders;
    expect([a!.escape, b!.escape]).toEqual([':', '']);
  });

  it('rejects "%" right after a placeholder that another one follows (it starts every escape)', () => {
    // Otherwise ('x', '25y%') and ('x%y', '25') would both render 'x%25y%25'.
    expect(() => parseKeyTemplate('<a>%<b>')).toThrow(LockKeyError);
    expect(() => parseKeyTemplate('<a>%25<b>')).toThrow(/"%"/);
    expect(parseKeyTemplate('<a>:%<b>').placeholders).toHaveLength(2);
    expect(parseKeyTemplate('usage:<a>%').placeholders).toHaveLength(1);
  });

  it.each([
    ['an empty template', ''],
    ['an empty placeholder', 'order:<>'],
    ['a blank placeholder', 'order:< >'],
    ['an unclosed "<"', 'order:<userId'],
    ['a stray ">"', 'order:userId>'],
    ['a stray "<" in a literal', 'a<b:<id>'],
    ['nested brackets', 'order:<a<b>>'],
    ['adjacent placeholders', 'order:<a><b>'],
    ['adjacent placeholders at the start', '<a><b>:x'],
    ['an empty path segment', 'order:<a..b>'],
    ['a trailing dot', 'order:<a.>'],
    ['a leading dot', 'order:<.a>'],
    ['a space inside a path', 'order:<user id>'],
    ['a bracket index', 'order:<items[0]>'],
    ['a segment that starts with a digit and has letters', 'order:<1a>'],
  ])('rejects %s with LockKeyError', (_what, source) => {
    expect(() => parseKeyTemplate(source)).toThrow(LockKeyError);
  });

  it('says why a template is invalid, quoting it', () => {
    expect(() => parseKeyTemplate('order:<a><b>')).toThrow(
      /"order:<a><b>" is invalid: two placeholders touch/,
    );
    expect(() => parseKeyTemplate('order:<userId')).toThrow(/unbalanced/);
  });

  it('rejects a template that is not a string', () => {
    expect(() => parseKeyTemplate(undefined as unknown as string)).toThrow(LockKeyError);
  });
});

describe('renderKeyTemplate', () => {
  it('renders plain values in place', () => {
    expect(render('voucher:<v>:user:<u>', { v: 'v1', u: 'u7' })).toBe('voucher:v1:user:u7');
  });

  it.each([
    'alice-42',
    'alice@example.com',
    '3f2b8c1e-9d4a-4c7b-8e2f-1a2b3c4d5e6f',
    '2026-12-01T05:00:00.000Z',
    'a:b',
    'a/b',
    'with spaces',
    'zoë-日本-🙂',
    "+=,;!$&'()~_.",
  ])('writes %p as it is in "order:<id>" and in "order:<id>:items"', (id) => {
    expect(render('order:<id>', { id })).toBe(`order:${id}`);
    expect(render('order:<id>:items', { id })).toBe(`order:${id}:items`);
  });

  describe('encoding: distinct argument tuples never share a key', () => {
    it('tells `a:b` + `c` from `a` + `b:c`', () => {
      const left = render('x:<first>:<second>', { first: 'a:b', second: 'c' });
      const right = render('x:<first>:<second>', { first: 'a', second: 'b:c' });
      expect(left).not.toBe(right);
      expect(left).toBe('x:a%3Ab:c');
      expect(right).toBe('x:a:b:c');
    });

    it('escapes the separator whatever it is', () => {
      expect(render('<a>/<b>', { a: 'x/y', b: 'z' })).not.toBe(
        render('<a>/<b>', { a: 'x', b: 'y/z' }),
      );
      expect(render('<a>-and-<b>', { a: 'p-and-q', b: 'r' })).not.toBe(
        render('<a>-and-<b>', { a: 'p', b: 'q-and-r' }),
      );
    });

    it('escapes "%" itself, so an escaped value cannot pose as a raw one', () => {
      const raw = render('x:<a>:<b>', { a: 'a%3Ab', b: 'c' });
      const escaped = render('x:<a>:<b>', { a: 'a:b', b: 'c' });
      expect(raw).toBe('x:a%253Ab:c');
      expect(raw).not.toBe(escaped);
    });

    it('escapes hash-tag braces, so a value cannot move the Cluster hash slot', () => {
      expect(render('order:<id>', { id: '{x}' })).toBe('order:%7Bx%7D');
    });

    it('escapes glob characters, so a key is never a pattern', () => {
      expect(render('order:<id>', { id: 'a*b?c[d]e\\f' })).toBe('order:a%2Ab%3Fc%5Bd%5De%5Cf');
    });

    it('escapes newlines and other control characters', () => {
      expect(render('order:<id>', { id: 'a\nb\r\tc\u0000\u007f' })).toBe(
        'order:a%0Ab%0D%09c%00%7F',
      );
    });

    it('keeps unicode as is, and escapes a non-ASCII separator as UTF-8', () => {
      expect(render('order:<id>', { id: 'zoë-日本-🙂' })).toBe('order:zoë-日本-🙂');
      expect(render('<a>é<b>', { a: 'xéy', b: 'z' })).toBe('x%C3%A9yéz');
    });

    it('gives unpaired surrogates distinct escapes (Redis would store both as U+FFFD)', () => {
      const high = render('order:<id>', { id: 'a\uD800' });
      const low = render('order:<id>', { id: 'a\uDC00' });
      const replacement = render('order:<id>', { id: 'a\uFFFD' });
      expect(new Set([high, low, replacement]).size).toBe(3);
      expect(Buffer.from(high, 'utf8').toString('utf8')).toBe(high);
    });

    it('is injective over a grid of awkward values', () => {
      const alphabet = ['', ':', '%', 'a', '%3A', '{', '*'];
      const values: string[] = [];
      for (const x of alphabet) for (const y of alphabet) if (x + y) values.push(x + y);
      const keys = new Map<string, string>();
      const collisions: string[] = [];
      for (const a of values) {
        for (const b of values) {
          const key = render('k:<a>:<b>', { a, b });
          const tuple = JSON.stringify([a, b]);
          const seen = keys.get(key);
          if (seen !== undefined && seen !== tuple) collisions.push(`${seen} and ${tuple}: ${key}`);
          keys.set(key, tuple);
        }
      }
      // One assertion for the whole grid: an expect() per pair made this spec slow.
      expect(collisions).toEqual([]);
    });

    it.each(['<a>:<b>', '<a>:<b>:', 'k:<a>:x:<b>:<c>', '<a>25<b>', '<a>:%<b>%', '<a>é<b>'])(
      'is injective for %p over a grid of awkward values',
      (source) => {
        const alphabet = [':', '%', 'a', '2', '5', '%3A', '%25', 'é', '{'];
        const values = alphabet.flatMap((x) => alphabet.map((y) => x + y));
        const template = parseKeyTemplate(source);
        const names = template.placeholders.map((placeholder) => placeholder.text);
        const keys = new Map<string, string>();
        const collisions: string[] = [];
        const tuples = (depth: number): string[][] =>
          depth === 0 ? [[]] : tuples(depth - 1).flatMap((t) => values.map((v) => [...t, v]));
        for (const tuple of tuples(Math.min(names.length, 2))) {
          const full = names.map((_, i) => tuple[i] ?? 'c');
          const key = renderKeyTemplate(template, (p) => full[names.indexOf(p.text)]);
          const id = JSON.stringify(full);
          const seen = keys.get(key);
          if (seen !== undefined && seen !== id) collisions.push(`${seen} and ${id}: ${key}`);
          keys.set(key, id);
        }
        expect(collisions).toEqual([]);
      },
    );
  });

  describe('values', () => {
    it('formats numbers, bigints and booleans with String()', () => {
      expect(render('n:<v>', { v: 42 })).toBe('n:42');
      expect(render('n:<v>', { v: -1.5 })).toBe('n:-1.5');
      expect(render('n:<v>', { v: 10n })).toBe('n:10');
      expect(render('n:<v>', { v: false })).toBe('n:false');
    });

    it('locks 42 and "42" as the same resource (a route param and a parsed id name the same thing)', () => {
      expect(render('order:<id>', { id: 42 })).toBe(render('order:<id>', { id: '42' }));
      expect(render('order:<id>', { id: 42n })).toBe(render('order:<id>', { id: '42' }));
    });

    it.each([
      ['undefined', undefined, /undefined \(the value is missing\)/],
      ['null', null, /resolved to null/],
      ['an empty string', '', /resolved to an empty string/],
      ['an object', { id: 1 }, /resolved to an object/],
      ['an array', ['a'], /resolved to an object/],
      ['a date', new Date(0), /resolved to an object/],
      ['NaN', NaN, /resolved to NaN/],
      ['Infinity', Infinity, /resolved to Infinity/],
      ['-Infinity', -Infinity, /resolved to -Infinity/],
      ['a function', () => 'x', /resolved to a function/],
      ['a symbol', Symbol('x'), /resolved to a symbol/],
    ])('rejects %s with LockKeyError, naming the template and placeholder', (_what, value, why) => {
      const attempt = (): string => render('order:<userId>', { userId: value });
      expect(attempt).toThrow(LockKeyError);
      expect(attempt).toThrow(why);
      expect(attempt).toThrow(/"order:<userId>": placeholder <userId>/);
    });

    it('never renders "undefined" or "null" into a key', () => {
      expect(() => render('a:<x>:b', {})).toThrow(LockKeyError);
    });
  });
});

describe('readPath', () => {
  it('follows own properties, array indexes included', () => {
    expect(readPath({ dto: { user: { id: 'u1' } } }, ['dto', 'user', 'id'])).toBe('u1');
    expect(readPath([{ id: 7 }], ['0', 'id'])).toBe(7);
    expect(readPath({ a: 1 }, [])).toEqual({ a: 1 });
  });

  it('returns undefined through null, undefined and primitives', () => {
    expect(readPath({ a: null }, ['a', 'b'])).toBeUndefined();
    expect(readPath(undefined, ['a'])).toBeUndefined();
    expect(readPath('text', ['length'])).toBeUndefined();
    expect(readPath(42, ['toFixed'])).toBeUndefined();
  });

  it('never reads from prototypes', () => {
    expect(readPath({}, ['constructor'])).toBeUndefined();
    expect(readPath({}, ['constructor', 'name'])).toBeUndefined();
    expect(readPath({}, ['__proto__'])).toBeUndefined();
    expect(readPath({}, ['toString'])).toBeUndefined();
    expect(readPath({}, ['hasOwnProperty'])).toBeUndefined();
    class User {
      get id(): string {
        return 'from-prototype';
      }
    }
    expect(readPath(new User(), ['id'])).toBeUndefined();
    expect(readPath(Object.create({ id: 'inherited' }), ['id'])).toBeUndefined();
  });

  it('reads an own "__proto__" data property (as JSON.parse creates) and nothing beyond it', () => {
    const body = JSON.parse('{"__proto__": {"id": "own"}}') as unknown;
    expect(readPath(body, ['__proto__', 'id'])).toBe('own');
    expect(readPath(body, ['__proto__', 'constructor'])).toBeUndefined();
    expect(Object.prototype).not.toHaveProperty('id');
  });

  it('makes a prototype-shaped placeholder a LockKeyError, not a key', () => {
    const template = parseKeyTemplate('order:<constructor.name>');
    expect(() => renderKeyTemplate(template, ({ path }) => readPath({}, path))).toThrow(
      LockKeyError,
    );
    const proto = parseKeyTemplate('order:<__proto__.polluted>');
    expect(() => renderKeyTemplate(proto, ({ path }) => readPath({}, path))).toThrow(LockKeyError);
  });
});
