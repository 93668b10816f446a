import { parseArgs } from 'node:util';
import { messages } from '../errors/messages';
import { RedisLockError } from '../errors/errors';
import { closestName } from '../options/known-options';
import { DEFAULT_OPTIONS } from '../options/option-defaults';
import { LockService } from '../service/lock.service';
import { formatEvicted, formatInfo, formatLeader, formatListing } from './format';

/** Where the command writes: one line at a time (a test collects them). */
export interface CliOutput {
  out(line: string): void;
  err(line: string): void;
}

/**
 * Exit codes: 0 done (`show`: the lock is held; `release --force`: a lock was removed; `leader`:
 * the role is led), 1 nothing there (`show` of a free lock, `release --force` of a free lock,
 * `leader` of a role nobody leads), 2 usage error (unknown command
 * or option, missing key, `release` without `--force`), 3 Redis refused or could not be reached
 * (or an option was rejected).
 */
export const EXIT = { ok: 0, notHeld: 1, usage: 2, redis: 3 } as const;

export const USAGE = `Usage: nestjs-redis-lock <command> [options]

Commands:
  ls                      list the locks held under the prefix, of every kind: mutexes
                          (exclusive), read locks (read), semaphores (semaphore), with
                          their holder count
  show <key>              show the key's locks, every kind holding it: kind, ttl, fence,
                          holder (instance id, since) — or the readers, or the permits held
                          and their holders — fair waiters
  release <key> --force   remove every holder of the key, of every kind; prints what it
                          removed (holders see the loss at their next renewal: signals abort)
  leader <role>           show who leads the role (instance id, since), its term, the lease
                          left and how many processes wait to lead

Options:
  --prefix <prefix>  the key prefix (default "${DEFAULT_OPTIONS.prefix}", the library's default)
  --json             print JSON instead of text
  -h, --help         print this help

Environment:
  REDIS_URL          the Redis to use (default redis://127.0.0.1:6379)

Exit codes: 0 done, 1 lock not held (or role not led), 2 usage error, 3 Redis error.`;

const OPTIONS = {
  prefix: { type: 'string' },
  force: { type: 'boolean' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

/**
 * One line for a command line `parseArgs` refused: the option, what it likely meant, and where
 * the help is — not `parseArgs`' own text (whose advice on `--` is for positionals) and the
 * whole usage after it.
 */
function parseFailure(error: unknown): string {
  const { code, message } = error as { code?: unknown; message?: unknown };
  const text = typeof message === 'string' ? message : String(error);
  // "Unknown option '--prefx'…", "Option '--prefix <value>' argument missing"
  const option = /'(-{1,2}[^'\s=]+)/.exec(text)?.[1];
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && option) {
    const meant = closestName(option.replace(/^-+/, ''), Object.keys(OPTIONS));
    return messages.cliUnknownOption(option, meant && `--${meant}`);
  }
  if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' && option && /missing/.test(text)) {
    return messages.cliOptionNeedsValue(option);
  }
  return messages.cliBadArguments(text.split('. ')[0] ?? text);
}

/** Runs one command line; resolves the exit code. Never throws for a Redis or usage error. */
export async function runCli(
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
  output: CliOutput,
): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      allowPositionals: true,
      options: OPTIONS,
    });
  } catch (error) {
    output.err(parseFailure(error));
    return EXIT.usage;
  }
  const { values, positionals } = parsed;
  const [command, key, ...extra] = positionals;
  if (values.help) {
    output.out(USAGE);
    return EXIT.ok;
  }
  const usage = usageError(command, key, extra, values.force === true);
  if (usage) {
    // A refusal explains itself; a malformed command line gets the usage too.
    output.err(usage.startsWith('Refusing') ? usage : `${usage}\n\n${USAGE}`);
    return EXIT.usage;
  }
  const json = values.json === true;
  let locks: LockService | undefined;
  try {
    locks = new LockService({
      redis: env.REDIS_URL || 'redis://127.0.0.1:6379',
      prefix: values.prefix ?? DEFAULT_OPTIONS.prefix,
      instanceId: `nestjs-redis-lock-cli:${process.pid}`,
    });
    if (command === 'ls') {
      const listed = [];
      let cursor: string | undefined;
      do {
        const page = await locks.list({ cursor, count: 100 });
        listed.push(...page.locks);
        cursor = page.cursor;
      } while (cursor !== undefined);
      output.out(json ? JSON.stringify(listed) : formatListing(listed));
      return EXIT.ok;
    }
    if (command === 'leader') {
      const info = await locks.inspectLeader(key!);
      output.out(json ? JSON.stringify(info) : formatLeader(info));
      return info.led ? EXIT.ok : EXIT.notHeld;
    }
    if (command === 'show') {
      const info = await locks.inspect(key!);
      output.out(json ? JSON.stringify({ key, ...info }) : formatInfo(key!, info));
      return info.held ? EXIT.ok : EXIT.notHeld;
    }
    const evicted = await locks.evict(key!);
    output.out(json ? JSON.stringify({ key, removed: evicted }) : formatEvicted(key!, evicted));
    return evicted ? EXIT.ok : EXIT.notHeld;
  } catch (error) {
    if (!(error instanceof RedisLockError)) throw error;
    output.err(`nestjs-redis-lock: ${error.message}`);
    return EXIT.redis;
  } finally {
    await locks?.close();
  }
}

/** What is wrong with the command line, or undefined when it can run. */
function usageError(
  command: string | undefined,
  key: string | undefined,
  extra: readonly string[],
  force: boolean,
): string | undefined {
  if (command === undefined) return 'Missing command.';
  if (!['ls', 'show', 'release', 'leader'].includes(command))
    return `Unknown command "${command}".`;
  if (command === 'ls') return key === undefined ? undefined : 'ls takes no key.';
  if (key === undefined) return `${command} needs a <${command === 'leader' ? 'role' : 'key'}>.`;
  if (extra.length > 0) return `Unexpected argument "${extra[0]}".`;
  if (command === 'release' && !force) {
    return (
      `Refusing to release "${key}" without --force: it deletes the lock whoever holds it, ` +
      'and its holder keeps working until its next renewal. Check it first with ' +
      `"nestjs-redis-lock show ${key}", then run "nestjs-redis-lock release ${key} --force".`
    );
  }
  return undefined;
}
