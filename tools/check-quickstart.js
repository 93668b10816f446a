#!/usr/bin/env node
/**
 * Runs the README's quick start as a newcomer would, from the README itself (nothing copied): in an
 * empty temporary folder outside the repository it runs the install command, writes `main.ts`,
 * runs the compile-and-start command, sends the README's `curl`, then two concurrent orders of one
 * user (one is created, the other answers 409 with Retry-After), and stops the app with SIGTERM.
 *
 *   node tools/check-quickstart.js [<packed tarball>]
 *
 * What differs from a newcomer's run, and why: `nestjs-redis-lock` in the install command is the
 * packed tarball (this commit, not the registry's release); the app gets `PORT` (a free port: 3000
 * may be taken) and `REDIS_URL` (a `redis-server` this script starts on a free port and stops by
 * pid), and the curl's `localhost:3000` follows `PORT`. Without a tarball argument it builds and
 * packs the repository itself.
 *
 * Env: QUICKSTART_NEST_MAJORS, space-separated (default "latest 11 10"): "latest" runs the install
 * command as written; a number adds `@nestjs/common@N @nestjs/core@N` and pins
 * `@nestjs/platform-express@N`, the majors the README claims. KEEP_QUICKSTART_DIR=1 keeps the folder.
 */
/* global setTimeout, fetch, AbortSignal */
'use strict';
const { spawn, spawnSync, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const { packLibrary } = require('./pack-library');

const ROOT = path.resolve(__dirname, '..');
const MAJORS = (process.env.QUICKSTART_NEST_MAJORS ?? 'latest 11 10').split(/\s+/).filter(Boolean);
const START_BOUND_MS = 90_000;
const REQUEST_BOUND_MS = 15_000;
const STOP_BOUND_MS = 20_000;

/** The quick start's fenced blocks, in order, from `## Quick start` to the next `## `. */
function quickStart(readme) {
  const start = readme.indexOf('\n## Quick start\n');
  if (start < 0) throw new Error('README.md has no "## Quick start" section');
  const end = readme.indexOf('\n## ', start + 1);
  const section = readme.slice(start, end < 0 ? undefined : end);
  const blocks = [...section.matchAll(/^```(\w*)\n([\s\S]*?)^```$/gm)].map((m) => ({
    lang: m[1],
    body: m[2],
  }));
  const ts = blocks.filter((b) => b.lang === 'ts');
  const bash = blocks.filter((b) => b.lang === 'bash').map((b) => b.body);
  if (ts.length !== 1) throw new Error(`quick start: expected one ts block, found ${ts.length}`);
  const lines = bash.flatMap((b) => b.replace(/\\\n\s*/g, '').split('\n')).filter(Boolean);
  const find = (what, test) => {
    const found = lines.filter(test);
    if (found.length !== 1)
      throw new Error(`quick start: expected one ${what} line, found ${found}`);
    return found[0].replace(/\s+#.*$/, '');
  };
  return {
    mainTs: ts[0].body,
    install: find('npm install', (l) => /\bnpm install\b/.test(l)),
    run: find('node main.js', (l) => /\bnode main\.js\b/.test(l)),
    curl: find('curl', (l) => /^curl\b/.test(l)),
  };
}

function sh(command, cwd, env = {}) {
  console.log(`quickstart: $ ${command}`);
  const r = spawnSync('bash', ['-c', command], {
    cwd,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
    encoding: 'utf8',
    timeout: 300_000,
  });
  if (r.status !== 0) throw new Error(`"${command}" exited ${r.status ?? r.signal}`);
  return r.stdout;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitUntil(what, boundMs, test) {
  const deadline = Date.now() + boundMs;
  for (;;) {
    if (await test()) return;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${boundMs} ms`);
    await sleep(200);
  }
}

function listening(port) {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1', () => (socket.end(), resolve(true)));
    socket.on('error', () => resolve(false));
  });
}

function order(port, userId) {
  return fetch(`http://127.0.0.1:${port}/vouchers/flash-sale/orders`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ userId }),
    signal: AbortSignal.timeout(REQUEST_BOUND_MS),
  }).then(async (res) => ({
    status: res.status,
    retryAfter: res.headers.get('retry-after'),
    body: await res.json(),
  }));
}

/** The install command for `major`, with the tarball in place of the package name. */
function installFor(install, tarball, major) {
  let cmd = install.replace(/(^|\s)nestjs-redis-lock(?=\s|$)/, `$1${tarball}`);
  if (cmd === install) throw new Error(`quick start: the install line names no nestjs-redis-lock`);
  if (major !== 'latest') {
    cmd = cmd.replace(
      /(^|\s)@nestjs\/platform-express(?=\s|$)/,
      `$1@nestjs/platform-express@${major}`,
    );
    cmd += ` @nestjs/common@${major} @nestjs/core@${major}`;
  }
  return cmd;
}

async function runOne(qs, tarball, major, work, redisUrl) {
  const dir = path.join(work, `nest-${major}`);
  fs.mkdirSync(dir);
  sh(installFor(qs.install, tarball, major), dir);
  const versions = JSON.parse(sh('npm ls --depth=0 --json', dir)).dependencies;
  const nest = versions['@nestjs/platform-express']?.version;
  console.log(
    `quickstart: @nestjs/platform-express ${nest}, typescript ${versions.typescript?.version}`,
  );
  fs.writeFileSync(path.join(dir, 'main.ts'), qs.mainTs);

  const port = await freePort();
  console.log(`quickstart: $ ${qs.run}   (PORT=${port} REDIS_URL=${redisUrl})`);
  const app = spawn('bash', ['-c', qs.run], {
    cwd: dir,
    env: { ...process.env, PORT: String(port), REDIS_URL: redisUrl },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true, // its own process group: tsc, then node, stopped together by pgid
  });
  let log = '';
  app.stdout.on('data', (d) => (log += d));
  app.stderr.on('data', (d) => (log += d));
  let exited = null;
  const exit = new Promise((r) => app.on('exit', (code, signal) => r((exited = code ?? signal))));
  const stop = async () => {
    if (exited !== null) return;
    // SIGTERM to what the command started (node, after tsc), as `docker stop` or Ctrl-C would;
    // bash then exits with node's code.
    const children = spawnSync('pgrep', ['-P', String(app.pid)], { encoding: 'utf8' })
      .stdout.split('\n')
      .filter(Boolean)
      .map(Number);
    for (const pid of children.length > 0 ? children : [app.pid]) {
      try {
        process.kill(pid, 'SIGTERM');
      } catch {
        // already gone
      }
    }
    await Promise.race([exit, sleep(STOP_BOUND_MS)]);
    if (exited === null) {
      try {
        process.kill(-app.pid, 'SIGKILL');
      } catch {
        // already gone
      }
      throw new Error(`the app did not exit within ${STOP_BOUND_MS} ms of SIGTERM`);
    }
  };
  try {
    await waitUntil('the app listening', START_BOUND_MS, async () => {
      if (exited !== null) throw new Error(`the app exited (${exited}):\n${log}`);
      return listening(port);
    });

    // The README's curl, as written but for the port.
    const curl = qs.curl.replace(/localhost:3000\b/g, `localhost:${port}`);
    const first = JSON.parse(sh(`${curl} --silent --show-error --fail-with-body`, dir));
    if (first.status !== 'created') throw new Error(`curl answered ${JSON.stringify(first)}`);

    // "A second click while the first is in flight answers 409 Conflict with Retry-After: 1".
    // Two requests sent at once overlap unless the first finished before the second arrived; then
    // the second says already-ordered, and a fresh user tries again (at most 10 pairs).
    let seen;
    for (let i = 0; i < 10 && !seen; i++) {
      const pair = await Promise.all([order(port, `twice-${i}`), order(port, `twice-${i}`)]);
      const created = pair.filter((r) => r.status === 201 && r.body.status === 'created');
      if (created.length !== 1) throw new Error(`one user, two orders: ${JSON.stringify(pair)}`);
      seen = pair.find((r) => r.status === 409);
      if (seen && seen.retryAfter !== '1')
        throw new Error(`409 without Retry-After: 1: ${JSON.stringify(seen)}`);
    }
    if (!seen) throw new Error('ten pairs of concurrent orders never overlapped into a 409');
    console.log(`quickstart: Nest ${nest}: created, then 409 Retry-After ${seen.retryAfter}`);
    await stop();
    // Nest's shutdown hooks close the app, then re-raise the signal: SIGTERM (143 through bash).
    if (![0, 143, 'SIGTERM'].includes(exited)) {
      throw new Error(`the app exited ${exited} on SIGTERM:\n${log}`);
    }
    return `Nest ${nest}: ok`;
  } catch (error) {
    console.error(log);
    throw error;
  } finally {
    await stop().catch(() => {});
  }
}

async function main() {
  const qs = quickStart(fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8'));
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'nrl-quickstart-'));
  const redisPort = await freePort();
  const pidfile = path.join(work, 'redis.pid');
  let results = [];
  try {
    const tarball = process.argv[2] ? path.resolve(process.argv[2]) : packLibrary(work);
    execFileSync('redis-server', [
      ...['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
      ...['--daemonize', 'yes', '--pidfile', pidfile, '--dir', work],
    ]);
    await waitUntil('redis-server', 10_000, () => listening(redisPort));
    for (const major of MAJORS) {
      results.push(await runOne(qs, tarball, major, work, `redis://127.0.0.1:${redisPort}`));
    }
    console.log(`quickstart: ${results.join('; ')}`);
  } finally {
    // Only the redis-server this script started, by its pid.
    try {
      process.kill(Number(fs.readFileSync(pidfile, 'utf8')), 'SIGTERM');
    } catch {
      // already gone
    }
    if (process.env.KEEP_QUICKSTART_DIR === '1') console.log(`quickstart: kept ${work}`);
    else fs.rmSync(work, { recursive: true, force: true });
  }
}

main().catch((error) => {
  console.error(`quickstart: FAILED: ${error.message}`);
  process.exitCode = 1;
});
