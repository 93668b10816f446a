/**
 * Re-renders `<stem>.md` and `<stem>-s3p-wait.svg` from `<stem>.json` (default bench/results/latest):
 *   node -r ./tools/ts-register.js bench/render.ts [stem]
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { render, type Results } from './lib/report';

const stem = process.argv[2] ?? join(__dirname, 'results/latest');
const results = JSON.parse(readFileSync(`${stem}.json`, 'utf8')) as Results;
const svgPath = `${stem}-s3p-wait.svg`;
const { markdown, svg } = render(results, basename(svgPath));
writeFileSync(`${stem}.md`, markdown);
if (svg) writeFileSync(svgPath, svg);
process.stdout.write(markdown);
