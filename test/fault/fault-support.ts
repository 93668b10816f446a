/**
 * Helpers shared by the fault suites: naming the Redis keys of a lock, recognising the lock's
 * commands on the wire (for the TCP proxy), and recording what each scenario observed.
 */
import { appendFileSync } from 'node:fs';
import type Redis from 'ioredis';
import { acquireScript } from '../../lib/kinds/exclusive/acquire.script';
import { extendScript } from '../../lib/kinds/exclusive/extend.script';
import type { LuaScript } from '../../lib/lua/lua-script';
import { releaseScript } from '../../lib/kinds/exclusive/release.script';
import { renewManyScript } from '../../lib/kinds/exclusive/renew-many.script';
import type { CommandMatcher } from '../support/tcp-proxy';
import { now, sleep } from '../support/time';

/**
 * The Redis names of lock `key` under `prefix`, as the library lays them out (one hash tag), for
 * the keys these suites use (none starts with a brace, which would get one more `{` in front).
 */
export function lockKeys(prefix: string, key: string) {
  const lock = `${prefix}{${key}}`;
  return { lock, fence: `${lock}:fence`, channel: `${lock}:released` };
}

/** Whether `args` runs one of `scripts`: by SHA (EVALSHA), or by body (the EVAL fallback). */
const runsOneOf = (args: string[], ...scripts: LuaScript[]): boolean =>
  scripts.some(
    (script) =>
      (args[0] === 'evalsha' && args[1] === script.sha) ||
      (args[0] === 'eval' && args[1] === script.source),
  );

/** The keys a script command names. */
const scriptKeys = (args: string[]): string[] => args.slice(3, 3 + Number(args[2]));

/** The library's scripts on one lock, told apart by which script runs and the keys it names. */
export const lockCommand = {
  acquire: (prefix: string, key: string): CommandMatcher => {
    const { lock } = lockKeys(prefix, key);
    return (args) => runsOneOf(args, acquireScript) && scriptKeys(args)[0] === lock;
  },
  release: (prefix: string, key: string): CommandMatcher => {
    const { lock } = lockKeys(prefix, key);
    return (args) => runsOneOf(args, releaseScript) && scriptKeys(args)[0] === lock;
  },
  /** A renewal (the watchdog's batch may name many locks) or an `extend()` of this lock. */
  extend: (prefix: string, key: string): CommandMatcher => {
    const { lock } = lockKeys(prefix, key);
    return (args) =>
      runsOneOf(args, extendScript, renewManyScript) && scriptKeys(args).includes(lock);
  },
};

/**
 * Lease keys under `prefix` right now, via SCAN: `<prefix>{<key>}`, not the fence counters, holder
 * records or fair-mode queues beside them (`{<key>}:…`).
 */
export async function leaseKeysUnder(redis: Redis, prefix: string): Promise<string[]> {
  const pattern = `${prefix.replace(/[*?[\]\\]/g, '\\$&')}*`;
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    found.push(...keys.filter((key) => key.endsWith('}')));
    cursor = next;
  } while (cursor !== '0');
  return found.sort();
}

/**
 * Polls the TTL of every lease key under `prefix` for `duration` ms and resolves the keys whose
 * TTL went up between two polls (someone renewed them) and those still there at the end.
 */
export async function watchLeases(
  redis: Redis,
  prefix: string,
  duration: number,
  every = 20,
): Promise<{ refreshed: string[]; remaining: string[] }> {
  const last = new Map<string, number>();
  const refreshed = new Set<string>();
  const deadline = now() + duration;
  let remaining: string[] = [];
  do {
    remaining = await leaseKeysUnder(redis, prefix);
    for (const key of remaining) {
      const pttl = await redis.pttl(key);
      const previous = last.get(key);
      if (previous !== undefined && pttl > previous) refreshed.add(key);
      last.set(key, pttl);
    }
    await sleep(every);
  } while (now() < deadline);
  return { refreshed: [...refreshed], remaining };
}

/** Resolves what `promise` settled with, tagged, so a test can assert on either outcome. */
export async function outcome<T>(
  promise: Promise<T>,
): Promise<{ ok: true; value: T } | { ok: false; error: unknown }> {
  try {
    return { ok: true, value: await promise };
  } catch (error) {
    return { ok: false, error };
  }
}

/** The `name` of an error (or `String(value)`), for readable assertions and observations. */
export function errorName(error: unknown): string {
  return error instanceof Error ? error.name : String(error);
}

/** Nearest-rank percentile of `values` (sorted copy). */
export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1);
  return sorted[Math.max(0, rank)] ?? NaN;
}

/**
 * Records what a scenario observed (counts, times) for docs/reliability.md: one JSON
 * line per call, appended to the file named by FAULT_OBSERVATIONS; a no-op when it is unset.
 */
export function observe(scenario: string, facts: Record<string, unknown>): void {
  const file = process.env.FAULT_OBSERVATIONS;
  if (!file) return;
  appendFileSync(file, `${JSON.stringify({ scenario, ...facts })}\n`);
}

/** Rounds ms for reports. */
export const ms = (value: number): number => Math.round(value);
