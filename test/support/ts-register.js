/**
 * Minimal TypeScript require hook for child processes (multi-process tests, the sample app, the
 * demo): transpiles each .ts file with the project's own `typescript` (decorator metadata
 * included, which Nest's DI needs) and maps the package name to lib/ as tsconfig `paths` does.
 * No type checking here: `npm run lint` type-checks everything.
 *   node -r ./test/support/ts-register.js sample-app/main.ts
 */
const fs = require('node:fs');
const path = require('node:path');
const Module = require('node:module');
const ts = require('typescript');

const root = path.resolve(__dirname, '../..');
const compilerOptions = {
  module: ts.ModuleKind.CommonJS,
  target: ts.ScriptTarget.ES2022,
  experimentalDecorators: true,
  emitDecoratorMetadata: true,
  esModuleInterop: true,
  sourceMap: false,
  inlineSourceMap: true,
};

require.extensions['.ts'] = (module, filename) => {
  const source = fs.readFileSync(filename, 'utf8');
  const { outputText } = ts.transpileModule(source, { compilerOptions, fileName: filename });
  module._compile(outputText, filename);
};

const resolve = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  if (request === 'nestjs-redis-lock') request = path.join(root, 'lib/index.ts');
  return resolve.call(this, request, ...rest);
};
