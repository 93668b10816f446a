#!/usr/bin/env node
/* global setTimeout, clearTimeout */
/**
 * Every `npm install` line of README.md and docs/*.md resolves beside each NestJS major it is for:
 * `npm install --dry-run` of the line in a temporary project that already has that major's
 * @nestjs/common, core and platform-express and this library (what "beside Nest N" means: a line
 * such as `npm install @nestjs/terminus` adds to an app that has both), so npm resolves every
 * peer range from the registry without installing anything. `nestjs-redis-lock` on a line is the
 * packed tarball of this commit.
 *
 *   node compat/install-lines.js [<packed tarball>]     (compat/run.sh passes its tarball)
 *
 * Which majors a line is for: a trailing comment naming them (`# Nest 12`, `# Nest 10 and 11`),
 * else every major the README claims (10, 11, 12). A line with `npm init` starts an empty
 * folder (the quick start's): it is resolved once, there, as written (tools/check-quickstart.js
 * runs it for real). Install lines belong in sh/bash blocks: one in prose fails the check.
 */
'use strict';
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { packLibrary } = require('../tools/pack-library');

const ROOT = path.resolve(__dirname, '..');
const MAJORS = [10, 11, 12];
const PARALLEL = 3;
const PAGES = ['README.md', ...fs.readdirSync(path.join(ROOT, 'docs')).map((f) => `docs/${f}`)]
  .filter((f) => f.endsWith('.md'))
  .sort();

/** `{ where, command, packages, majors, fresh }` per install line; throws on one in prose. */
function installLines() {
  const lines = [];
  for (const page of PAGES) {
    const text = fs.readFileSync(path.join(ROOT, page), 'utf8').split('\n');
    /** Outside a fence: null; inside one: whether it is a shell block. */
    let shell = null;
    for (let i = 0; i < text.length; i++) {
      if (/^```/.test(text[i])) {
        shell = shell === null ? /^```(sh|bash|shell)\s*$/.test(text[i]) : null;
        continue;
      }
      let line = text[i];
      if (shell === false) continue;
      if (shell === null) {
        // `npm install <packages>` in prose cannot say which major it is for.
        if (/`npm install [^`&]*[@a-z]/.test(line) && !/`npm install( &&|`)/.test(line)) {
          throw new Error(`${page}:${i + 1}: an install line in prose; put it in a sh block`);
        }
        continue;
      }
      const start = i;
      while (line.endsWith('\\') && i + 1 < text.length) line = line.slice(0, -1) + text[++i];
      const match = /(?:^|&&\s*)npm install\s+([^#&|;]*?)\s*(?:#\s*(.*))?$/.exec(line.trim());
      if (!match || !match[1]) continue;
      const packages = match[1].split(/\s+/).filter((p) => p && !p.startsWith('-'));
      if (packages.length === 0) continue;
      const forNest = /\bNest(?:JS)?\s+([\d,\sand]+)/.exec(match[2] ?? '');
      const majors = forNest ? [...forNest[1].matchAll(/\d+/g)].map(Number) : MAJORS;
      const fresh = /\bnpm init\b/.test(line);
      lines.push({ where: `${page}:${start + 1}`, command: line.trim(), packages, majors, fresh });
    }
  }
  return lines;
}

/** Resolves `packages` with `npm install --dry-run` in a new project beside Nest `major`. */
function dryRun(work, id, packages, major, tarball) {
  const dir = path.join(work, id);
  fs.mkdirSync(dir, { recursive: true });
  const base =
    major === undefined
      ? {}
      : {
          '@nestjs/common': `^${major}.0.0`,
          '@nestjs/core': `^${major}.0.0`,
          '@nestjs/platform-express': `^${major}.0.0`,
          'reflect-metadata': '^0.2.0',
          rxjs: '^7.8.0',
          // A page's line without the library (`npm install @nestjs/terminus`) adds to an app
          // that has it.
          'nestjs-redis-lock': `file:${tarball}`,
        };
  const manifest = { name: `install-line-${id}`, private: true, dependencies: base };
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify(manifest, null, 2));
  const args = ['install', '--dry-run', '--no-audit', '--no-fund', '--loglevel=error', ...packages];
  return new Promise((resolve) => {
    const child = spawn('npm', args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    const timer = setTimeout(() => child.kill('SIGTERM'), 180_000);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ ok: code === 0, output });
    });
  });
}

async function main() {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'nrl-install-lines-'));
  try {
    const tarball = process.argv[2] ? path.resolve(process.argv[2]) : packLibrary(work);
    const jobs = [];
    installLines().forEach((line, n) => {
      const packages = line.packages.map((p) => (p === 'nestjs-redis-lock' ? tarball : p));
      for (const major of line.fresh ? [undefined] : line.majors) {
        jobs.push({ line, packages, major, id: `${n}-${major ?? 'fresh'}` });
      }
    });
    const results = [];
    let next = 0;
    await Promise.all(
      Array.from({ length: PARALLEL }, async () => {
        while (next < jobs.length) {
          const job = jobs[next++];
          results.push({
            ...job,
            ...(await dryRun(work, job.id, job.packages, job.major, tarball)),
          });
        }
      }),
    );
    let failed = 0;
    for (const r of results.sort((a, b) => a.id.localeCompare(b.id, 'en', { numeric: true }))) {
      const beside = r.major === undefined ? 'in an empty folder' : `beside Nest ${r.major}`;
      console.log(
        `install-lines: ${r.ok ? 'ok    ' : 'FAILED'} ${r.line.where} ${beside}: ${r.line.command}`,
      );
      if (!r.ok) {
        failed++;
        const why = r.output
          .split('\n')
          .filter((l) => /ERESOLVE|Could not resolve|peer|E404|notarget/i.test(l));
        console.log(`  ${why.slice(0, 6).join('\n  ')}`);
      }
    }
    console.log(`install-lines: ${results.length - failed} passed, ${failed} failed`);
    if (failed > 0) process.exitCode = 1;
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

main().catch((error) => {
  console.error(`install-lines: FAILED: ${error.message}`);
  process.exitCode = 1;
});
