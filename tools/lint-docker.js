#!/usr/bin/env node
/**
 * Lints Dockerfile and docker-compose.yml (npm run lint:docker, part of npm run lint; Docker itself
 * is not needed). The compose file's schema and practices are dclint's (run beside this script);
 * the Dockerfile's syntax is dockerfile-utils' (the linter of the VS Code Docker extension). On
 * top, what this repository asks of its image:
 *   - a multi-stage build; every stage on a Node.js line that still gets security fixes;
 *   - the runtime stage: no dev toolchain installed, a non-root USER, a HEALTHCHECK, an exec-form
 *     CMD (so SIGTERM reaches node);
 *   - compose: Redis (no password) not published on any host interface but 127.0.0.1, every
 *     published port bound to an interface, and a stop_grace_period longer than the library's
 *     shutdownGrace, so the final release is not SIGKILLed.
 */
const fs = require('node:fs');
const path = require('node:path');
const { validate } = require('dockerfile-utils');
const YAML = require('yaml');

const ROOT = path.resolve(__dirname, '..');
/**
 * Node.js majors with security support (see the Node.js release schedule): 22 is in maintenance
 * until April 2027, 24 in active LTS. Update when a line reaches its end of life.
 */
const SUPPORTED_NODE = [22, 24];
const problems = [];
const fail = (file, message) => problems.push(`${file}: ${message}`);

function lintDockerfile(file) {
  const text = fs.readFileSync(path.join(ROOT, file), 'utf8');
  for (const d of validate(text)) fail(file, `line ${d.range.start.line + 1}: ${d.message}`);

  // Instructions, continuation lines joined, comments dropped.
  const instructions = text
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line && !line.startsWith('#'))
    .map((line) => {
      const [keyword, ...rest] = line.split(/\s+/);
      return { keyword: keyword.toUpperCase(), args: rest.join(' ') };
    });
  const stages = [];
  for (const i of instructions) {
    if (i.keyword === 'FROM') stages.push({ from: i.args, body: [] });
    else stages.at(-1)?.body.push(i);
  }
  if (stages.length < 2) fail(file, 'not a multi-stage build: the toolchain ends up in the image');
  for (const { from } of stages) {
    const node = /^(?:docker\.io\/)?(?:library\/)?node:(\d+)/.exec(from);
    if (!node) fail(file, `FROM ${from}: not a node image this lint knows`);
    else if (!SUPPORTED_NODE.includes(Number(node[1]))) {
      fail(
        file,
        `FROM ${from}: Node.js ${node[1]} has no security support (use ${SUPPORTED_NODE})`,
      );
    }
  }
  const runtime = stages.at(-1)?.body ?? [];
  const all = (keyword) => runtime.filter((i) => i.keyword === keyword);
  for (const run of all('RUN')) {
    if (/--include[= ]dev|npm ci(?![^&;]*--omit[= ]dev)/.test(run.args)) {
      fail(file, `runtime stage installs dev dependencies: RUN ${run.args}`);
    }
  }
  const user = all('USER').at(-1)?.args;
  if (!user || /^(root|0)(:|$)/.test(user)) fail(file, 'runtime stage runs as root (add USER)');
  if (all('HEALTHCHECK').length === 0) fail(file, 'runtime stage has no HEALTHCHECK');
  const cmd = all('CMD').at(-1)?.args ?? '';
  if (!cmd.startsWith('[')) fail(file, `CMD ${cmd}: use the exec form so SIGTERM reaches node`);
}

function lintCompose(file) {
  const compose = YAML.parse(fs.readFileSync(path.join(ROOT, file), 'utf8'), { merge: true });
  const defaults = fs.readFileSync(path.join(ROOT, 'lib/options/option-defaults.ts'), 'utf8');
  const grace = /shutdownGrace: ([\d_]+)/.exec(defaults);
  if (!grace) throw new Error('shutdownGrace not found in lib/options/option-defaults.ts');
  const shutdownGraceS = Number(grace[1].replace(/_/g, '')) / 1000;
  for (const [name, service] of Object.entries(compose.services ?? {})) {
    for (const port of service.ports ?? []) {
      const spec = typeof port === 'object' ? `${port.host_ip ?? ''}:${port.published}` : port;
      const exposesRedis = /(^|:)6379(:|$)/.test(String(spec)) || /redis/.test(service.image ?? '');
      if (exposesRedis && !String(spec).startsWith('127.0.0.1:')) {
        fail(file, `${name}: publishes an unauthenticated Redis (${spec}) beyond 127.0.0.1`);
      }
    }
    if (service.build) {
      const stop = /^(\d+)s$/.exec(service.stop_grace_period ?? '10s');
      const seconds = stop ? Number(stop[1]) : NaN;
      if (!(seconds > shutdownGraceS)) {
        fail(
          file,
          `${name}: stop_grace_period ${service.stop_grace_period ?? '10s (default)'} is not longer than shutdownGrace (${shutdownGraceS} s)`,
        );
      }
    }
  }
}

lintDockerfile('Dockerfile');
lintCompose('docker-compose.yml');
if (problems.length > 0) {
  for (const p of problems) console.error(p);
  process.exitCode = 1;
} else {
  console.log('lint:docker: Dockerfile and docker-compose.yml ok');
}
