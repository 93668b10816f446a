/* eslint-disable @typescript-eslint/no-explicit-any */
import { readParamBindings, type ParamBinding } from './param-names';

type AnyFunction = (...args: never[]) => unknown;

/** The bindings as a plain object, for readable expectations. */
function bindings(fn: AnyFunction): Record<string, ParamBinding> | undefined {
  const map = readParamBindings(fn);
  return map && Object.fromEntries(map);
}

/** A function with exactly this parameter list (as code coverage or a bundler might emit it). */
function withParams(list: string): AnyFunction {
  return new Function(`return function (${list}) {}`)() as AnyFunction;
}

const arg = (index: number, ...path: string[]): ParamBinding => ({ index, path });

describe('readParamBindings', () => {
  describe('plain parameters', () => {
    it('binds each name to its argument index', () => {
      class Orders {
        create(userId: string, voucherId: string): string {
          return userId + voucherId;
        }
      }
      expect(bindings(Orders.prototype.create)).toEqual({ userId: arg(0), voucherId: arg(1) });
    });

    it('reads async methods, generators and static methods', () => {
      class Jobs {
        async run(tenantId: string): Promise<string> {
          return tenantId;
        }
        *each(batchId: number): Generator<number> {
          yield batchId;
        }
        static once(jobName: string): string {
          return jobName;
        }
        async *stream(cursor: string): AsyncGenerator<string> {
          yield cursor;
        }
      }
      expect(bindings(Jobs.prototype.run)).toEqual({ tenantId: arg(0) });
      expect(bindings(Jobs.prototype.each)).toEqual({ batchId: arg(0) });
      expect(bindings(Jobs.once)).toEqual({ jobName: arg(0) });
      expect(bindings(Jobs.prototype.stream)).toEqual({ cursor: arg(0) });
    });

    it('reads function declarations and expressions', () => {
      function named(a: string, b: string): string {
        return a + b;
      }
      const anonymous = function (x: number): number {
        return x;
      };
      expect(bindings(named)).toEqual({ a: arg(0), b: arg(1) });
      expect(bindings(anonymous)).toEqual({ x: arg(0) });
    });

    it('reads arrow functions, with and without parentheses, async or not', () => {
      expect(bindings((a: string, b: string) => a + b)).toEqual({ a: arg(0), b: arg(1) });
      expect(bindings(withArrow('id => id'))).toEqual({ id: arg(0) });
      expect(bindings(withArrow('async id => id'))).toEqual({ id: arg(0) });
      expect(bindings(async (orderId: string) => orderId)).toEqual({ orderId: arg(0) });
      expect(bindings(withArrow('async (a, b) => a'))).toEqual({ a: arg(0), b: arg(1) });
    });

    it('reads an empty parameter list as no names', () => {
      class Cron {
        tick(): void {}
      }
      expect(bindings(Cron.prototype.tick)).toEqual({});
      expect(bindings(() => 1)).toEqual({});
    });

    it('ignores a trailing comma', () => {
      expect(bindings(withParams('a, b,'))).toEqual({ a: arg(0), b: arg(1) });
    });
  });

  describe('defaults', () => {
    it('drops simple defaults', () => {
      class Reports {
        build(tenantId = 'acme', limit = 10): string {
          return tenantId + limit;
        }
      }
      expect(bindings(Reports.prototype.build)).toEqual({ tenantId: arg(0), limit: arg(1) });
    });

    it('is not fooled by commas, parentheses, brackets and arrows inside defaults', () => {
      class Tricky {
        run(
          a = (x: number, y: number) => x + y,
          b = { c: 1, d: [2, 3] },
          c = 'a,b)',
          d = Math.max(1, 2),
          e = [1, [2, 3]],
          f = `t(${'x'},)`,
        ): unknown {
          return [a, b, c, d, e, f];
        }
      }
      expect(bindings(Tricky.prototype.run)).toEqual({
        a: arg(0),
        b: arg(1),
        c: arg(2),
        d: arg(3),
        e: arg(4),
        f: arg(5),
      });
    });

    it('is not fooled by quotes, escaped quotes and comparison operators inside defaults', () => {
      expect(bindings(withParams(`a = "it's", b = 'say "hi"', c = 'x\\', y', d = 1 >= 0`))).toEqual(
        { a: arg(0), b: arg(1), c: arg(2), d: arg(3) },
      );
    });

    it('does not take "//" inside a string default for a comment', () => {
      class Fetcher {
        fetch(url = 'http://example.com/a', id: string): string {
          return url + id;
        }
      }
      expect(bindings(Fetcher.prototype.fetch)).toEqual({ url: arg(0), id: arg(1) });
      expect(bindings(withParams("url = 'http://x',\n  id"))).toEqual({ url: arg(0), id: arg(1) });
    });

    it('reads parameter lists instrumented by code coverage', () => {
      expect(
        bindings(withParams('a = (cov_1().b[0][0]++, 1), { b } = (cov_1().b[1][0]++, {})')),
      ).toEqual({ a: arg(0), b: arg(1, 'b') });
    });
  });

  describe('regular expressions and division in defaults', () => {
    it('is not fooled by a comma inside a regex default', () => {
      class Importer {
        async importCsv(userId: string, sep = /,\s*/, file: string): Promise<string> {
          return userId + String(sep) + file;
        }
      }
      expect(bindings(Importer.prototype.importCsv)).toEqual({
        userId: arg(0),
        sep: arg(1),
        file: arg(2),
      });
    });

    it('is not fooled by brackets, parentheses, quotes and slashes inside regex literals', () => {
      expect(
        bindings(
          withParams(
            String.raw`a = /[,/]/g, b = /\/\//, c = /\(/, d = /[)\]]/, e = /'/, f = /"/, g = /[{]/, h`,
          ),
        ),
      ).toEqual({
        a: arg(0),
        b: arg(1),
        c: arg(2),
        d: arg(3),
        e: arg(4),
        f: arg(5),
        g: arg(6),
        h: arg(7),
      });
    });

    it('reads a regex after an operator, a bracket or a keyword, and inside a call', () => {
      expect(
        bindings(
          withParams(
            String.raw`a = x || /,/, b = [/,/], c = typeof /,/, d = f(/[(]/, 1), e = { r: /}/ }, g`,
          ),
        ),
      ).toEqual({ a: arg(0), b: arg(1), c: arg(2), d: arg(3), e: arg(4), g: arg(5) });
    });

    it('takes a slash after a value for a division', () => {
      expect(bindings(withParams('a = b / 2, c'))).toEqual({ a: arg(0), c: arg(1) });
      expect(bindings(withParams('a = x.return / 2, b = x.typeof /2/ 1, c'))).toEqual({
        a: arg(0),
        b: arg(1),
        c: arg(2),
      });
      expect(bindings(withParams('a = (1) / 2, b = x[0] / y / z, c = 6 /2/ 3, d'))).toEqual({
        a: arg(0),
        b: arg(1),
        c: arg(2),
        d: arg(3),
      });
    });

    it('is not fooled by template literals with nested templates, quotes and braces', () => {
      expect(bindings(withParams('a = `x,${`y,${"}"}`},`, b = `${/`/}`, c = `\\`,(`, d'))).toEqual({
        a: arg(0),
        b: arg(1),
        c: arg(2),
        d: arg(3),
      });
    });
  });

  describe('destructuring', () => {
    it('binds object properties to a path inside the argument', () => {
      class Orders {
        create({ userId, voucherId }: { userId: string; voucherId: string }): string {
          return userId + voucherId;
        }
      }
      expect(bindings(Orders.prototype.create)).toEqual({
        userId: arg(0, 'userId'),
        voucherId: arg(0, 'voucherId'),
      });
    });

    it('binds nested and renamed properties', () => {
      class Orders {
        create(tenant: string, { user: { id: uid, name }, order: { id: orderId } }: any): string {
          return tenant + uid + name + orderId;
        }
      }
      expect(bindings(Orders.prototype.create)).toEqual({
        tenant: arg(0),
        uid: arg(1, 'user', 'id'),
        name: arg(1, 'user', 'name'),
        orderId: arg(1, 'order', 'id'),
      });
    });

    it('binds properties with defaults, renamed or not, and quoted keys', () => {
      expect(
        bindings(withParams(`{ a = 1, b: renamed = 2, 'c-d': cd, "e": e = 'x:y' } = {}`)),
      ).toEqual({
        a: arg(0, 'a'),
        renamed: arg(0, 'b'),
        cd: arg(0, 'c-d'),
        e: arg(0, 'e'),
      });
    });

    it('does not take a colon inside a default for a rename', () => {
      class Tricky {
        run({ a = Math.random() > 2 ? 'x:y' : 'z' }: any, b: string): string {
          return a + b;
        }
      }
      expect(bindings(Tricky.prototype.run)).toEqual({ a: arg(0, 'a'), b: arg(1) });
      expect(bindings(withParams(`{ a = { k: 1 } }`))).toEqual({ a: arg(0, 'a') });
    });

    it('binds array elements to their position, holes included', () => {
      class Pairs {
        swap([first, , third]: string[], [[inner]]: [string[]]): string {
          return `${first}${third}${inner}`;
        }
      }
      expect(bindings(Pairs.prototype.swap)).toEqual({
        first: arg(0, '0'),
        third: arg(0, '2'),
        inner: arg(1, '0', '0'),
      });
    });

    it('binds objects inside arrays and arrays inside objects', () => {
      expect(bindings(withParams('[{ id }], { tags: [firstTag] }'))).toEqual({
        id: arg(0, '0', 'id'),
        firstTag: arg(1, 'tags', '0'),
      });
    });

    it('skips nested rest elements, which have no single path', () => {
      expect(bindings(withParams('{ id, ...others }, [head, ...tail]'))).toEqual({
        id: arg(0, 'id'),
        head: arg(1, '0'),
      });
    });
  });

  describe('rest parameters', () => {
    it('binds a rest parameter to all remaining arguments', () => {
      class Batch {
        lockAll(scope: string, ...ids: string[]): string {
          return scope + ids.join();
        }
      }
      expect(bindings(Batch.prototype.lockAll)).toEqual({
        scope: arg(0),
        ids: { index: 1, path: [], rest: true },
      });
    });

    it('reads what a wrapping decorator leaves: only its own rest parameter', () => {
      const wrapper = function (this: unknown, ...args: unknown[]): unknown {
        return args;
      };
      expect(bindings(wrapper)).toEqual({ args: { index: 0, path: [], rest: true } });
    });
  });

  describe('comments', () => {
    it('ignores block and line comments between parameters', () => {
      class Commented {
        run(
          /* the user */ userId: string, // who orders
          // the voucher, see (docs)
          voucherId: string /* , fake */,
        ): string {
          return userId + voucherId;
        }
      }
      expect(bindings(Commented.prototype.run)).toEqual({ userId: arg(0), voucherId: arg(1) });
    });

    it('ignores comments with parentheses and commas in a raw parameter list', () => {
      expect(bindings(withParams('a /* ), b */, // c, d)\n e'))).toEqual({ a: arg(0), e: arg(1) });
    });
  });

  describe('unreadable sources', () => {
    it('returns undefined for native and bound functions', () => {
      class Svc {
        run(id: string): string {
          return id;
        }
      }
      expect(readParamBindings(Math.max)).toBeUndefined();
      expect(readParamBindings(Svc.prototype.run.bind(new Svc()))).toBeUndefined();
    });
  });
});

/** An arrow function from source, for shapes TypeScript would rewrite (`id => id`). */
function withArrow(source: string): AnyFunction {
  return new Function(`return ${source}`)() as AnyFunction;
}
