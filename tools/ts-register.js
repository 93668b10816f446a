/**
 * Minimal TypeScript require hook for child processes (multi-process tests, the sample app, the
 * demo, the bench, the Docker image): transpiles each .ts file with the project's own `typescript` (decorator metadata
 * included, which Nest's DI needs) and maps the package name to lib/ as tsconfig `paths` does.
 * No type checking here: `npm run lint` type-checks everything.
 *   node -r ./tools/ts-register.js sample-app/main.ts
 */
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');
const Module = require('node:module');

const root = path.resolve(__dirname, '..');
const compilerOptions = {
  module: 'commonjs', // strings, not ts enums: typescript loads only on a cache miss
  target: 'es2022',
  experimentalDecorators: true,
  emitDecoratorMetadata: true,
  esModuleInterop: true,
  sourceMap: false,
  inlineSourceMap: true,
};

// Transpiled output is cached on disk by content, so a worker process that starts while the
// sources are unchanged loads neither `typescript` nor transpiles anything (seconds saved per
// process on a busy CI machine; the multi-process tests start several at once).
const cacheDir = path.join(root, 'node_modules/.cache/ts-register');
const cacheSalt = JSON.stringify([require('typescript/package.json').version, compilerOptions]);
let ts;

function transpile(source, filename) {
  const hash = crypto.createHash('sha1').update(cacheSalt).update(filename).update(source);
  const cached = path.join(cacheDir, `${hash.digest('hex')}.js`);
  try {
    return fs.readFileSync(cached, 'utf8');
  } catch {
    // Not cached yet.
  }
  ts ??= require('typescript');
  const { outputText } = ts.transpileModule(source, { compilerOptions, fileName: filename });
  try {
    // Write then rename, so a concurrent reader never sees half a file.
    fs.mkdirSync(cacheDir, { recursive: true });
    const partial = `${cached}.${process.pid}.tmp`;
    fs.writeFileSync(partial, outputText);
    fs.renameSync(partial, cached);
  } catch {
    // A read-only checkout just runs uncached.
  }
  return outputText;
}

require.extensions['.ts'] = (module, filename) => {
  module._compile(transpile(fs.readFileSync(filename, 'utf8'), filename), filename);
};

const resolve = Module._resolveFilename;
Module._resolveFilename = function (request, ...rest) {
  if (request === 'nestjs-redis-lock') request = path.join(root, 'lib/index.ts');
  if (request === 'nestjs-redis-lock/health') request = path.join(root, 'lib/health/index.ts');
  return resolve.call(this, request, ...rest);
};
