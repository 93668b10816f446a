/**
 * Builds the library and packs it into `dir` as `npm publish` would; returns the tarball's path.
 * For the checks that install the package as a user would (install lines, the quick start).
 */
const { execFileSync } = require('node:child_process');
const path = require('node:path');

const ROOT = path.resolve(__dirname, '..');

function packLibrary(dir) {
  execFileSync('npm', ['run', 'build', '--silent'], { cwd: ROOT, stdio: 'inherit' });
  const out = execFileSync('npm', ['pack', '--pack-destination', dir, '--json', '--silent'], {
    cwd: ROOT,
    encoding: 'utf8',
  });
  return path.join(dir, JSON.parse(out)[0].filename);
}

module.exports = { packLibrary };
