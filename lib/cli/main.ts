#!/usr/bin/env node
/**
 * The `nestjs-redis-lock` command (the package's `bin`): lists, shows and force-releases the locks
 * under a prefix. `nestjs-redis-lock --help` for usage; the exit codes are in `cli.ts`.
 */
import { runCli } from './cli';

runCli(process.argv.slice(2), process.env, {
  out: (text) => process.stdout.write(`${text}\n`),
  err: (text) => process.stderr.write(`${text}\n`),
}).then(
  (code) => (process.exitCode = code),
  (error: unknown) => {
    process.stderr.write(`nestjs-redis-lock: ${String(error)}\n`);
    process.exitCode = 70;
  },
);
