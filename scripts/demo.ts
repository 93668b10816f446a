/**
 * `npm run demo`: the voucher shop on three replicas, the same burst of concurrent orders twice —
 * first with LOCKS=off (the naive code races), then with the locks — and a side-by-side table.
 * Uses REDIS_URL if it answers, else starts a throw-away redis-server; leaves nothing running.
 *
 *   DEMO_USERS=30 DEMO_ATTEMPTS=10 DEMO_STOCK=10 ORDER_DELAY_MS=20 npm run demo
 */
import { randomBytes } from 'node:crypto';
import { cpus, loadavg } from 'node:os';
import Redis from 'ioredis';
import {
  fireBurst,
  readVoucher,
  resetVoucher,
  summarize,
  type BurstSummary,
} from '../sample-app/harness/burst';
import {
  readLockStats,
  resetLockStats,
  type LockFamilyStats,
} from '../sample-app/harness/lock-stats';
import { startFleet } from '../sample-app/harness/replicas';
import { startRedis, type RedisServer } from '../test/support/redis-server';

const REPLICAS = 3;
const USERS = intFromEnv('DEMO_USERS', 30);
const ATTEMPTS = intFromEnv('DEMO_ATTEMPTS', 10);
const STOCK = intFromEnv('DEMO_STOCK', 10);
const ORDER_DELAY_MS = intFromEnv('ORDER_DELAY_MS', 20);
const VOUCHER = 'flash-sale';
/** Long enough for every replica's every-second settlement job to fire after the burst. */
const SETTLE_MS = 2_200;

interface Outcome extends BurstSummary {
  settled: number;
  /** LOCKS=on only: each replica's lock events during the measured burst, per key family. */
  lockStats?: { replica: string; families: Record<string, LockFamilyStats> }[];
}

/** What to undo if the demo is interrupted, in the order it was set up: see the signal handler. */
const cleanups = new Set<() => Promise<void>>();

/** Runs `work`, then `undo` — also on failure, and on Ctrl+C (through `cleanups`). */
async function undoing<T>(undo: () => Promise<void>, work: () => Promise<T>): Promise<T> {
  cleanups.add(undo);
  try {
    return await work();
  } finally {
    cleanups.delete(undo);
    await undo();
  }
}

async function main(): Promise<number> {
  const redis = await findRedis();
  const prefix = `demo:${randomBytes(4).toString('hex')}:`;
  return undoing(redis.stop, () =>
    undoing(
      () => deleteKeys(redis.url, prefix),
      () => run(redis.url, prefix),
    ),
  );
}

async function run(redisUrl: string, prefix: string): Promise<number> {
  console.log(
    `${REPLICAS} replicas · ${USERS} users × ${ATTEMPTS} attempts = ${USERS * ATTEMPTS} ` +
      `concurrent orders · voucher "${VOUCHER}" with stock ${STOCK} · ORDER_DELAY_MS=${ORDER_DELAY_MS}`,
  );
  // Latencies depend on the machine: the replicas and the client share its CPUs.
  console.log(`machine: ${cpus().length} CPUs, load average ${loadavg()[0]!.toFixed(1)}\n`);
  const off = await scenario(redisUrl, `${prefix}off:`, false);
  const on = await scenario(redisUrl, `${prefix}on:`, true);
  console.log();
  printTable(off, on);
  printLockStats(on);
  return verdict(off, on);
}

async function scenario(redisUrl: string, prefix: string, locks: boolean): Promise<Outcome> {
  const label = locks ? 'LOCKS=on ' : 'LOCKS=off';
  process.stdout.write(`${label}  starting ${REPLICAS} replicas … `);
  const fleet = await startFleet({
    redisUrl,
    prefix,
    locks,
    count: REPLICAS,
    orderDelayMs: ORDER_DELAY_MS,
  });
  return undoing(
    () => fleet.stop(),
    async () => {
      const ports = fleet.urls.map((url) => url.split(':').pop()).join(', ');
      process.stdout.write(`ready (${ports}); burst … `);
      await resetVoucher(fleet.urls[0]!, VOUCHER, STOCK);
      const attempts = await fireBurst({
        urls: fleet.urls,
        voucherId: VOUCHER,
        users: USERS,
        attemptsPerUser: ATTEMPTS,
        // The replicas count their lock events from here: the warm-up burst is left out.
        afterWarmUp: locks
          ? async () => void (await Promise.all(fleet.urls.map(resetLockStats)))
          : undefined,
      });
      const summary = summarize(attempts, await readVoucher(fleet.urls[1]!, VOUCHER), REPLICAS);
      const lockStats = locks
        ? await Promise.all(
            fleet.replicas.map(async ({ name, url }) => ({
              replica: name,
              families: await readLockStats(url),
            })),
          )
        : undefined;
      process.stdout.write('done; letting the settlement job run … ');
      await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
      const { settled } = await readVoucher(fleet.urls[2]!, VOUCHER);
      process.stdout.write('stopping.\n');
      return { ...summary, settled, lockStats };
    },
  );
}

function printTable(off: Outcome, on: Outcome): void {
  const ms = (value: number) => `${Math.round(value)} ms`;
  const status = (o: Outcome, code: number) => o.byStatus[code] ?? 0;
  const reason = (o: Outcome, name: string) => o.byReason[name] ?? 0;
  const errors = (o: Outcome) =>
    Object.entries(o.byStatus)
      .filter(([code]) => Number(code) === 0 || Number(code) >= 500)
      .reduce((sum, [, n]) => sum + n, 0);
  const rows: [string, (o: Outcome) => string | number][] = [
    [`orders stored (stock ${STOCK}, ${USERS} users)`, (o) => o.orders],
    ['users with an order', (o) => o.usersWithOrder],
    ['orders per user (max)', (o) => o.maxOrdersPerUser],
    ['duplicate orders', (o) => o.duplicates],
    ['oversold units', (o) => o.oversold],
    ['stock left in Redis', (o) => o.stockLeft],
    ['units settled (cron on every replica)', (o) => o.settled],
    ['responses 201 Created', (o) => status(o, 201)],
    ['  409 already ordered', (o) => reason(o, 'already-ordered')],
    ['  409 busy (Retry-After: 1)', (o) => reason(o, 'busy')],
    ['  410 sold out', (o) => reason(o, 'sold-out')],
    ['  5xx / no answer', errors],
    ['latency p50', (o) => ms(o.p50Ms)],
    ['latency p99', (o) => ms(o.p99Ms)],
  ];
  const width = Math.max(...rows.map(([name]) => name.length)) + 2;
  const cell = (value: string | number) => String(value).padStart(12);
  console.log(`${''.padEnd(width)}${cell('LOCKS=off')}${cell('LOCKS=on')}`);
  console.log(`${''.padEnd(width)}${cell('---------')}${cell('--------')}`);
  for (const [name, value] of rows) {
    console.log(`${name.padEnd(width)}${cell(value(off))}${cell(value(on))}`);
  }
  console.log();
}

/**
 * What each replica's `LockService.on('acquired' | 'busy')` listeners saw in the locked burst,
 * for the two locks of an order (the settlement job's, busy on all but one replica each second by
 * design, is left out). Wait: the acquire call, waiting included, as `lock.acquire.duration`.
 */
function printLockStats(on: Outcome): void {
  if (!on.lockStats) return;
  const families: [string, string][] = [
    ['order', 'order:<user> (wait 0)'],
    ['stock', 'stock:<voucher> (queue)'],
  ];
  const width = Math.max(...on.lockStats.map((r) => r.replica.length)) + 2;
  const label = Math.max(...families.map(([, name]) => name.length)) + 2;
  const cell = (value: string | number) => String(value).padStart(10);
  const ms = (value: number) => `${value >= 10 ? Math.round(value) : value.toFixed(1)} ms`;
  console.log("LOCKS=on burst, per replica, from LockService.on('acquired' | 'busy'):");
  console.log(
    `${''.padEnd(width + label)}${cell('acquired')}${cell('busy')}${cell('wait p50')}${cell('wait p99')}`,
  );
  for (const { replica, families: stats } of on.lockStats) {
    for (const [family, name] of families) {
      const s = stats[family] ?? { acquired: 0, busy: 0, waitP50Ms: 0, waitP99Ms: 0 };
      console.log(
        `${replica.padEnd(width)}${name.padEnd(label)}${cell(s.acquired)}${cell(s.busy)}` +
          `${cell(ms(s.waitP50Ms))}${cell(ms(s.waitP99Ms))}`,
      );
    }
  }
  console.log();
}

/** Explains the result; exit code 1 when the locked run is not correct. */
function verdict(off: Outcome, on: Outcome): number {
  const expected = Math.min(STOCK, USERS);
  console.log(
    `LOCKS=off: ${off.orders} orders for ${STOCK} units — ${off.duplicates} duplicates, ` +
      `${off.oversold} units oversold, settlement booked ${off.settled}.`,
  );
  const correct =
    on.orders === expected &&
    on.duplicates === 0 &&
    on.oversold === 0 &&
    on.stockLeft === STOCK - on.orders &&
    on.settled === on.orders &&
    Object.keys(on.byStatus).every((code) => ['201', '409', '410'].includes(code));
  console.log(
    correct
      ? `LOCKS=on:  ${on.orders} orders for ${on.usersWithOrder} different users, none duplicated, ` +
          `nothing oversold, each booked once; every other attempt got 409 or 410.`
      : `LOCKS=on:  NOT CORRECT — expected ${expected} orders, one per user, no 5xx. See the table.`,
  );
  return correct ? 0 : 1;
}

/** REDIS_URL (default 127.0.0.1:6379) if it answers; else a redis-server of our own; else exit. */
async function findRedis(): Promise<{ url: string; stop(): Promise<void> }> {
  const url = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
  if (await answersPing(url)) {
    console.log(`Redis: ${url} (answered PING; the demo uses its own keys and deletes them)`);
    return { url, stop: async () => undefined };
  }
  let server: RedisServer;
  try {
    server = await startRedis();
  } catch (error) {
    console.error(
      `\nThe demo needs Redis: nothing answered at ${url} (REDIS_URL), and starting a local ` +
        `redis-server failed (${error instanceof Error ? error.message : String(error)}).\n\n` +
        'Get one of these, then run `npm run demo` again:\n' +
        '  docker run -d -p 127.0.0.1:6379:6379 redis:7   # Redis 7 on 127.0.0.1:6379\n' +
        '  sudo apt-get install redis-server     # Debian/Ubuntu (brew install redis on macOS)\n' +
        '  REDIS_URL=redis://host:6379 npm run demo   # a Redis you already run\n',
    );
    process.exit(1);
  }
  console.log(
    `Redis: nothing answered at ${url}; started redis-server on ${server.url} for the demo`,
  );
  return { url: server.url, stop: () => server.stop() };
}

async function answersPing(url: string): Promise<boolean> {
  const client = new Redis(url, {
    lazyConnect: true,
    connectTimeout: 1_000,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
  });
  client.on('error', () => undefined);
  try {
    await client.connect();
    return (await client.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    client.disconnect();
  }
}

/** Deletes the demo's keys (SCAN + DEL of its own prefix; never FLUSH a Redis we did not start). */
async function deleteKeys(url: string, prefix: string): Promise<void> {
  const client = new Redis(url, { maxRetriesPerRequest: 1 });
  client.on('error', () => undefined);
  try {
    let cursor = '0';
    do {
      const [next, keys] = await client.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 500);
      if (keys.length > 0) await client.del(...keys);
      cursor = next;
    } while (cursor !== '0');
  } catch (error) {
    console.error(`Could not delete the demo's keys (${prefix}*): ${String(error)}`);
  } finally {
    client.disconnect();
  }
}

function intFromEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1) {
    console.error(`${name}="${raw}" must be a positive integer.`);
    process.exit(1);
  }
  return value;
}

// Ctrl+C: stop the replicas, delete the demo's keys, stop our redis-server (newest first, 5 s at
// most), then exit; the 'exit' hook of the process harness SIGKILLs any child still tracked.
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    console.log(`\n${signal}: cleaning up …`);
    const steps = [...cleanups].reverse();
    const cleanup = (async () => {
      for (const step of steps) await step().catch(() => undefined);
    })();
    const deadline = new Promise((resolve) => setTimeout(resolve, 5_000).unref());
    void Promise.race([cleanup, deadline]).then(() => process.exit(130));
  });
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error instanceof Error ? (error.stack ?? error.message) : error);
    process.exit(1);
  },
);
