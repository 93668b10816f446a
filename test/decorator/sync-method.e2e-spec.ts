/**
 * `@Locked` on a synchronous method in a build the type check does not see: transpile-only
 * compilers (SWC through the Nest CLI, tsx, vitest) skip TS1241 and emit no `design:returntype`
 * (or one from the annotation only). The fixture is compiled here by `ts.transpileModule` with
 * `emitDecoratorMetadata` off, as such a build would. A synchronous method must fail with a named
 * error at its first call at the latest — its lock released, the reason logged — and at once on
 * every later call, never resolve quietly to a Promise its caller does not expect.
 */
import { Controller, Get, Logger, type INestApplication } from '@nestjs/common';
import type Redis from 'ioredis';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import request from 'supertest';
import ts from 'typescript';
import { Locked, LockService, RedisLockConfigError } from 'nestjs-redis-lock';
import { deleteKeys, redisClient } from '../support/shared-redis';
import { uniquePrefix } from '../support/unique-prefix';
import { createDecoratorApp } from './decorator-app';

const SOURCE = `
import { Injectable } from '@nestjs/common';
import { Locked } from 'nestjs-redis-lock';

@Injectable()
export class Calculator {
  calls = 0;

  // @ts-ignore the type check is what a transpile-only build skips
  @Locked('calc:<n>')
  double(n: number): number {
    this.calls++;
    return n * 2;
  }
}
`;

/** Compiles SOURCE as SWC or tsx would: decorators, no type metadata, no type check. */
function transpiled(): { Calculator: new () => { calls: number; double(n: number): unknown } } {
  const { outputText } = ts.transpileModule(SOURCE, {
    compilerOptions: {
      module: ts.ModuleKind.CommonJS,
      target: ts.ScriptTarget.ES2022,
      experimentalDecorators: true,
      emitDecoratorMetadata: false,
    },
  });
  const exports: Record<string, unknown> = {};
  new Function('exports', 'require', outputText)(exports, require);
  return exports as never;
}

const { Calculator } = transpiled();

@Controller('calc')
class CalcController {
  constructor(private readonly calculator: InstanceType<typeof Calculator>) {}

  @Get()
  get() {
    return { r: this.calculator.double(21) };
  }
}
Reflect.defineMetadata('design:paramtypes', [Calculator], CalcController);

describe('@Locked on a synchronous method compiled without type metadata', () => {
  const prefix = uniquePrefix('sync-method');
  let app: INestApplication;
  let redis: Redis;
  const errors: string[] = [];
  let spy: jest.SpyInstance;

  beforeAll(async () => {
    redis = redisClient();
    spy = jest
      .spyOn(Logger.prototype, 'error')
      .mockImplementation((message: unknown) => void errors.push(String(message)));
    app = await createDecoratorApp({
      prefix,
      controllers: [CalcController],
      providers: [Calculator],
    });
  });

  afterAll(async () => {
    spy.mockRestore();
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('fails its first call with RedisLockConfigError naming the method, and releases the lock', async () => {
    const calculator = app.get(Calculator);
    const result = calculator.double(21);
    await expect(result).rejects.toBeInstanceOf(RedisLockConfigError);
    await expect(result).rejects.toThrow(/Calculator\.double returned a number synchronously/);
    expect(calculator.calls).toBe(1);
    expect(await app.get(LockService).isLocked('calc:21')).toBe(false);
    expect(errors).toEqual([
      expect.stringMatching(/Calculator\.double returned a number synchronously/),
    ]);
  });

  it('leaves no unhandled rejection when the synchronous caller ignores the Promise', async () => {
    const fresh = transpiled().Calculator;
    const moduleApp = await createDecoratorApp({ prefix, providers: [fresh] });
    try {
      void moduleApp.get(fresh).double(2);
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(errors).toContainEqual(expect.stringMatching(/Calculator\.double returned a number/));
    } finally {
      await moduleApp.close();
    }
  });

  it('throws at once on every later call, before taking a lock or running the body', () => {
    const calculator = app.get(Calculator);
    const before = calculator.calls;
    expect(() => calculator.double(21)).toThrow(RedisLockConfigError);
    expect(calculator.calls).toBe(before);
  });

  it('makes a route that calls it answer 500, not {"r":{}}', async () => {
    const response = await request(app.getHttpServer()).get('/calc');
    expect(response.status).toBe(500);
  });
});

describe('@Locked on a method whose recorded return type is not a Promise or an Observable', () => {
  it('is refused at decoration, before the app starts', () => {
    const decorate = () => {
      class Prices {
        total(): number {
          return 1;
        }
      }
      Reflect.defineMetadata('design:returntype', Number, Prices.prototype, 'total');
      const descriptor = Object.getOwnPropertyDescriptor(Prices.prototype, 'total')!;
      (Locked('price') as (t: object, k: string, d: PropertyDescriptor) => void)(
        Prices.prototype,
        'total',
        descriptor,
      );
    };
    expect(decorate).toThrow(RedisLockConfigError);
    expect(decorate).toThrow(/Prices\.total is declared to return Number/);
  });
});

describe('the compile-time error of a synchronous @Locked method', () => {
  it('says what to do in its first line after TS1241', () => {
    const dir = mkdtempSync(join(tmpdir(), 'locked-sync-'));
    const decorator = resolve(__dirname, '../../lib/decorator/locked.decorator');
    const file = join(dir, 'sync.ts');
    writeFileSync(
      file,
      `import { Locked } from ${JSON.stringify(decorator)};\n` +
        `export class Sums {\n  @Locked('sum')\n  sum(): number {\n    return 1;\n  }\n}\n`,
    );
    const program = ts.createProgram([file], {
      strict: true,
      experimentalDecorators: true,
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.Node16,
      moduleResolution: ts.ModuleResolutionKind.Node16,
      skipLibCheck: true,
      noEmit: true,
      types: [],
    });
    const diagnostics = ts.getPreEmitDiagnostics(program, program.getSourceFile(file));
    const diagnostic = diagnostics.find((found) => found.code === 1241);
    const lines = ts.flattenDiagnosticMessageText(diagnostic!.messageText, '\n').split('\n');
    expect(lines[1]).toContain(
      '@Locked needs a method that returns a Promise or an Observable: make the method async',
    );
  });
});
