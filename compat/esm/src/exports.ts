import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import * as fromEsm from 'nestjs-redis-lock';

const require = createRequire(import.meta.url);

/**
 * Names Node adds to every CommonJS module's namespace, not ours: `default` (the whole
 * module.exports), `__esModule` (tsc's interop flag) and, on newer Node, `module.exports`.
 */
const INTEROP_NAMES = new Set(['default', '__esModule', 'module.exports']);

/**
 * Node gives an ESM importer of a CommonJS package the names its lexer finds in the compiled
 * `exports.X = …` / `Object.defineProperty(exports, 'X', …)` lines; a name it misses would be
 * `undefined` on import, or a link error as a named import. So: every name `require` sees must be
 * importable by name, and be the very same value — one module instance, whichever way it is loaded.
 * Returns how many names were compared.
 */
export function checkExportsMatchRequire(): number {
  const fromRequire = require('nestjs-redis-lock') as Record<string, unknown>;
  const esm = fromEsm as unknown as Record<string, unknown>;
  const required = Object.keys(fromRequire).sort();
  const imported = Object.keys(esm)
    .filter((name) => !INTEROP_NAMES.has(name))
    .sort();
  assert.ok(required.includes('LockService') && required.includes('Locked'), 'sanity');
  assert.deepEqual(imported, required, 'every export is importable by name from ESM');
  for (const name of required) {
    assert.equal(esm[name], fromRequire[name], `${name}: import and require give the same value`);
  }
  assert.equal(esm.default, fromRequire, 'the default import is module.exports');
  return required.length;
}
