#!/usr/bin/env node
/**
 * Type-checks every ```ts block of README.md and docs/*.md as a complete file: what a reader
 * pastes into a file of their own must compile as it stands, imports included.
 *
 *   node tools/check-doc-snippets.js        (npm run lint:docs, part of npm run lint)
 *
 * - Each block is one file (a module), checked with the repository's tsconfig.json, the package
 *   names mapped to lib/ as a user's install would resolve them.
 * - A block whose first line is `// <name>.ts` is that file; a line `// <other>.ts` inside it
 *   starts another. Files of one page sit in one folder, so `import … from './order.service'`
 *   finds the page's `// order.service.ts` block.
 * - The only skip: a fence written ```ts fragment: <why> — a snippet that cannot be a complete
 *   file (a class member shown alone, an options table in code). The reason is required.
 */
const fs = require('node:fs');
const path = require('node:path');
const ts = require('typescript');

const ROOT = path.resolve(__dirname, '..');
const PAGES = ['README.md', ...fs.readdirSync(path.join(ROOT, 'docs')).map((f) => `docs/${f}`)]
  .filter((f) => f.endsWith('.md'))
  .sort();
/** Virtual folder the snippets are checked in: inside the repository, so node_modules resolves. */
const VIRTUAL = path.join(ROOT, '.doc-snippets');

/** `{ page, line, files: [{ name, text }] }` per ts block, and the fragments skipped. */
function snippets() {
  const found = [];
  const skipped = [];
  for (const page of PAGES) {
    const lines = fs.readFileSync(path.join(ROOT, page), 'utf8').split('\n');
    for (let i = 0; i < lines.length; i++) {
      const open = /^```(ts|typescript)\b(.*)$/.exec(lines[i]);
      if (!open) continue;
      let end = i + 1;
      while (end < lines.length && !/^```\s*$/.test(lines[end])) end++;
      const body = lines.slice(i + 1, end);
      const info = open[2].trim();
      if (info.startsWith('fragment')) {
        const why = /^fragment:\s*(\S.*)$/.exec(info);
        if (!why)
          throw new Error(`${page}:${i + 1}: "fragment" needs a reason: \`\`\`ts fragment: <why>`);
        skipped.push({ page, line: i + 1, why: why[1] });
      } else if (info) {
        throw new Error(`${page}:${i + 1}: unknown fence info "${info}" (only "fragment: <why>")`);
      } else {
        found.push({ page, line: i + 1, files: split(body, i + 2, page) });
      }
      i = end;
    }
  }
  return { found, skipped };
}

/** Splits a block at `// <name>.ts` lines; each file keeps its line offset in the page. */
function split(body, firstLine, page) {
  const files = [];
  let current = { name: undefined, start: firstLine, lines: [] };
  body.forEach((line, n) => {
    const named = /^\/\/ ([\w.-]+\.ts)$/.exec(line);
    if (named) {
      if (current.lines.some((l) => l.trim())) files.push(current);
      current = { name: named[1], start: firstLine + n, lines: [] };
    }
    // Keep the line (a comment) so positions map back to the page.
    current.lines.push(line);
  });
  files.push(current);
  return files.map((f) => ({ ...f, page, text: f.lines.join('\n') + '\n' }));
}

function main() {
  const { found, skipped } = snippets();
  const config = ts.readConfigFile(path.join(ROOT, 'tsconfig.json'), ts.sys.readFile);
  const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, ROOT);
  const options = {
    ...parsed.options,
    noEmit: true,
    // Each block is a file of its own, even one with no import or export yet.
    moduleDetection: ts.ModuleDetectionKind.Force,
    declaration: false,
    sourceMap: false,
  };

  /** Virtual path -> { text, page, start }. */
  const virtual = new Map();
  found.forEach((snippet) => {
    const dir = path.join(VIRTUAL, snippet.page.replace(/[/.]/g, '_'));
    snippet.files.forEach((file, k) => {
      const name = file.name ?? `block-line-${snippet.line}${k ? `-${k}` : ''}.ts`;
      const at = path.join(dir, name);
      if (virtual.has(at))
        throw new Error(`${file.page}:${file.start}: a second file named ${name}`);
      // Pad with empty lines so TypeScript's line numbers are the page's.
      virtual.set(at, { text: '\n'.repeat(file.start - 1) + file.text, page: file.page });
    });
  });

  const host = ts.createCompilerHost(options);
  const readFile = host.readFile.bind(host);
  const fileExists = host.fileExists.bind(host);
  const getSourceFile = host.getSourceFile.bind(host);
  host.readFile = (f) => virtual.get(path.resolve(f))?.text ?? readFile(f);
  host.fileExists = (f) => virtual.has(path.resolve(f)) || fileExists(f);
  const directoryExists = host.directoryExists?.bind(host);
  host.directoryExists = (d) =>
    path.resolve(d).startsWith(VIRTUAL) || (directoryExists ? directoryExists(d) : true);
  host.getSourceFile = (f, lang, ...rest) => {
    const v = virtual.get(path.resolve(f));
    return v ? ts.createSourceFile(f, v.text, lang, true) : getSourceFile(f, lang, ...rest);
  };

  const program = ts.createProgram([...virtual.keys()], options, host);
  const diagnostics = ts.getPreEmitDiagnostics(program).filter((d) => {
    return d.file && virtual.has(path.resolve(d.file.fileName));
  });
  for (const d of diagnostics) {
    const v = virtual.get(path.resolve(d.file.fileName));
    const { line, character } = d.file.getLineAndCharacterOfPosition(d.start ?? 0);
    const message = ts.flattenDiagnosticMessageText(d.messageText, '\n  ');
    console.error(`${v.page}:${line + 1}:${character + 1} TS${d.code}: ${message}`);
  }
  const pages = new Set(found.map((s) => s.page)).size;
  console.log(
    `doc snippets: ${found.length} blocks (${virtual.size} files) from ${pages} pages type-checked, ` +
      `${diagnostics.length} errors; ${skipped.length} fragments skipped`,
  );
  for (const s of skipped) console.log(`  fragment ${s.page}:${s.line}: ${s.why}`);
  if (diagnostics.length > 0) process.exitCode = 1;
}

main();
