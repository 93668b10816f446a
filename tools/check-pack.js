#!/usr/bin/env node
/**
 * Checks what `npm publish` would ship, from `npm pack --dry-run --json`: the built library
 * (dist/), package.json, README.md, LICENSE and CHANGELOG.md, and nothing else — no sources, tests,
 * specs, benches or sample app. A forgotten `files` entry or a stray spec in dist/ fails CI here,
 * not after a release. Run it after `npm run build`:
 *   node tools/check-pack.js            (packs this checkout)
 *   node tools/check-pack.js pack.json  (checks a saved `npm pack --dry-run --json` output)
 */
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');

const root = path.resolve(__dirname, '..');

/** Files outside dist/ that the package must contain, and the only ones it may. */
const TOP_LEVEL = ['package.json', 'README.md', 'LICENSE', 'CHANGELOG.md'];
/** Entry points package.json names; without them the package cannot be imported. */
const REQUIRED_IN_DIST = [
  'dist/index.js',
  'dist/index.d.ts',
  'dist/testing/index.js',
  'dist/testing/index.d.ts',
  'dist/health/index.js',
  'dist/health/index.d.ts',
  'dist/inspect.js',
  'dist/inspect.d.ts',
  'dist/cli/main.js',
];
/** Compiled output only: JavaScript, declarations and their source maps. */
const DIST_FILE = /^dist\/.+\.(js|d\.ts|js\.map|d\.ts\.map)$/;
/** Test code compiled by mistake (a spec or an e2e file). */
const TEST_FILE = /(\.spec|\.e2e-spec|\.test)\.(js|d\.ts|js\.map|d\.ts\.map)$/;

function packedFiles(savedJson) {
  const json = savedJson
    ? fs.readFileSync(savedJson, 'utf8')
    : execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], {
        cwd: root,
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'inherit'],
      });
  const [pack] = JSON.parse(json);
  return pack.files.map((file) => file.path);
}

function problemsWith(files) {
  const problems = [];
  const present = new Set(files);
  for (const required of [...TOP_LEVEL, ...REQUIRED_IN_DIST]) {
    if (!present.has(required)) problems.push(`missing: ${required}`);
  }
  for (const file of files) {
    if (TOP_LEVEL.includes(file)) continue;
    if (!file.startsWith('dist/')) problems.push(`not part of the package: ${file}`);
    else if (!DIST_FILE.test(file)) problems.push(`not compiled output: ${file}`);
    else if (TEST_FILE.test(file)) problems.push(`test code in dist/: ${file}`);
  }
  return problems;
}

const files = packedFiles(process.argv[2]);
const problems = problemsWith(files);
if (problems.length > 0) {
  console.error(`check-pack: the package would ship the wrong files (${files.length} packed):`);
  for (const problem of problems) console.error(`  ${problem}`);
  process.exit(1);
}
const inDist = files.filter((file) => file.startsWith('dist/')).length;
console.log(`check-pack: ${files.length} files — ${TOP_LEVEL.join(', ')} and ${inDist} in dist/`);
