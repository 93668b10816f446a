/**
 * Every key a Lua script touches is declared in its KEYS — what a Cluster needs to route a script,
 * and what servers that enforce it (Dragonfly, for one) require. Redis does not enforce it, so this
 * suite checks it: it runs every lock operation of every kind, plain and fair, on one node and on
 * Redlock, against private `redis-server`s watched by MONITOR, which shows each script call with
 * its KEYS and then every command the script ran. The server itself (`COMMAND GETKEYS`) says which
 * arguments of those commands are keys; each must be one of the script call's KEYS. Every script
 * in lib/lua and lib/kinds must have run at least once, so a new script without a case here fails too. The
 * control: a script that reads a key it did not declare is caught by the same check.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Logger } from '@nestjs/common';
import Redis from 'ioredis';
import type { RedisLockModuleOptions } from 'nestjs-redis-lock';
import { LuaScript } from '../lib/lua/lua-script';
import { lockServices, warmedUp } from './support/lock-services';
import { monitorServer, type MonitoredCommand } from './support/monitor';
import { startRedis, stopAllRedis, type RedisServer } from './support/redis-server';
import { sleep, waitFor } from './support/time';
import { uniquePrefix } from './support/unique-prefix';

/** A script call and the commands it ran. */
interface ScriptRun {
  script: string;
  keys: string[];
  commands: string[][];
}

/** Every LuaScript that lib/lua and each kind's folder under lib/kinds export, by SHA1 of its body. */
function scriptsBySha(): Map<string, string> {
  const lib = join(__dirname, '../lib');
  const files = readdirSync(lib, { recursive: true, encoding: 'utf8' }).filter(
    (name) => /^(lua|kinds)\//.test(name) && name.endsWith('.script.ts'),
  );
  const found = new Map<string, string>();
  for (const file of files) {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- every script file, by name
    const exported = require(join(lib, file)) as Record<string, unknown>;
    for (const value of Object.values(exported)) {
      if (value instanceof LuaScript) found.set(value.sha, value.name);
    }
  }
  return found;
}

/** Groups a monitor log into script calls and the commands each ran (they follow it in order). */
function scriptRuns(log: MonitoredCommand[], shas: Map<string, string>): ScriptRun[] {
  const runs: ScriptRun[] = [];
  let current: ScriptRun | undefined;
  for (const entry of log) {
    const [name = '', ...rest] = entry.args;
    if (entry.fromScript) {
      current?.commands.push(entry.args);
      continue;
    }
    const command = name.toLowerCase();
    if (command === 'evalsha' || command === 'eval') {
      const [body = '', count = '0', ...more] = rest;
      const script = command === 'evalsha' ? (shas.get(body) ?? body) : 'eval';
      current = { script, keys: more.slice(0, Number(count)), commands: [] };
      runs.push(current);
    } else {
      current = undefined;
    }
  }
  return runs;
}

/** The commands of each run whose keys (as the server finds them) are not among its KEYS. */
async function undeclaredKeys(server: RedisServer, runs: ScriptRun[]): Promise<string[]> {
  const client = new Redis(server.url);
  const problems = new Set<string>();
  const keysOf = new Map<string, string[]>();
  try {
    for (const run of runs) {
      for (const command of run.commands) {
        const shape = JSON.stringify(command);
        let keys = keysOf.get(shape);
        if (!keys) {
          keys = (
            (await client.call('COMMAND', 'GETKEYS', ...command).catch(() => [])) as string[]
          ).map(String);
          keysOf.set(shape, keys);
        }
        for (const key of keys) {
          if (!run.keys.includes(key)) {
            problems.add(`${run.script}: ${command[0]} touches ${key}, not in KEYS`);
          }
        }
      }
    }
  } finally {
    client.disconnect();
  }
  return [...problems];
}

const prefix = uniquePrefix('script-keys');
const services = lockServices({ prefix });

beforeAll(() => {
  // Forced releases are reported as losses, and Redlock warns of the short test ttl: expected.
  jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
});
afterAll(async () => {
  await services.closeAll();
  await stopAllRedis();
  jest.restoreAllMocks();
});

/** How many commands the scripts ran: the log must have seen their insides, not only the calls. */
const commandCount = (runs: ScriptRun[]) => runs.reduce((sum, run) => sum + run.commands.length, 0);

/** Every operation of every kind, on two instances of one store (`options` picks the store). */
async function everyOperation(options: RedisLockModuleOptions, fair: boolean): Promise<void> {
  const a = await warmedUp(services.create({ ...options, fair, ttl: 300 }));
  const b = await warmedUp(services.create({ ...options, fair, ttl: 300 }));
  const redlock = options.redlock !== undefined;

  // A mutex: granted, busy, extended, renewed by the watchdog, released; a waiter handed it.
  const mutex = await a.acquire('mutex');
  expect(await b.tryAcquire('mutex')).toBeNull();
  await mutex.extend(600);
  await sleep(250); // the watchdog's renewal (every ttl / 3)
  const waiter = b.acquire('mutex', { wait: 3_000 });
  await sleep(30);
  await mutex.release();
  await (await waiter).release();

  // Multi-key: all at once (or one by one where that is the way).
  const pair = await a.acquire(['pair:a', 'pair:b']);
  await pair.release();

  if (!redlock) {
    // Readers: shared, extended, renewed; a writer that waits for them, and one that gives up.
    const reader = await a.acquire('doc', { mode: 'read' });
    await reader.extend(600);
    await sleep(250);
    await expect(b.acquire('doc', { wait: 150 })).rejects.toThrow();
    const writer = b.acquire('doc', { wait: 3_000 });
    await sleep(30);
    await reader.release();
    await (await writer).release();

    // Permits: taken, extended, renewed, one waiting for a free place, released.
    const one = await a.acquire('pool', { permits: 1 });
    await one.extend(600);
    await sleep(250);
    const next = b.acquire('pool', { permits: 1, wait: 3_000 });
    await sleep(30);
    await one.release();
    await (await next).release();

    // A role: elected, read back by an operator, resigned.
    const leader = a.lead('role');
    await waitFor(() => leader.isLeader, 3_000);
    await b.inspectLeader('role');
    await leader.resign();
  }

  // Operators: inspect, isLocked, list, forced release and eviction of every kind.
  const held = await a.acquire('ops');
  await b.inspect('ops');
  await b.isLocked('ops');
  await b.list();
  await b.forceRelease('ops');
  expect(held.isHeld).toBe(true); // it learns at its next renewal
  await a.acquire('ops-2');
  await b.evict('ops-2');
}

describe('every key a script touches is in its KEYS', () => {
  const shas = scriptsBySha();
  const ran = new Set<string>();

  it('on one Redis, plain and fair mode', async () => {
    const server = await startRedis();
    const watch = await monitorServer(server.url);
    await everyOperation({ redis: server.url }, false);
    await everyOperation({ redis: server.url }, true);
    const runs = scriptRuns(await watch.stop(), shas);
    for (const run of runs) ran.add(run.script);
    expect(commandCount(runs)).toBeGreaterThan(100);
    expect(await undeclaredKeys(server, runs)).toEqual([]);
  });

  it('on Redlock (3 primaries)', async () => {
    const nodes = await Promise.all([startRedis(), startRedis(), startRedis()]);
    const watches = await Promise.all(nodes.map((node) => monitorServer(node.url)));
    const redlock = { nodes: nodes.map((node) => node.url), restartGrace: 0 };
    await everyOperation({ redlock }, false);
    // A node whose fence counter is ahead of the others' (it saw grants they missed): the grant's
    // fence, the highest, is written back to the nodes behind.
    const ahead = new Redis(nodes[0].url);
    await ahead.set(`${prefix}{fenced}:fence`, String(Date.now() * 2_000), 'PX', 60_000);
    ahead.disconnect();
    const locks = await warmedUp(services.create({ redlock, ttl: 300 }));
    await (await locks.acquire('fenced')).release();
    for (const [i, watch] of watches.entries()) {
      const runs = scriptRuns(await watch.stop(), shas);
      for (const run of runs) ran.add(run.script);
      expect(commandCount(runs)).toBeGreaterThan(20);
      expect(await undeclaredKeys(nodes[i]!, runs)).toEqual([]);
    }
  });

  it('ran every script of lib/lua and lib/kinds', () => {
    const never = [...shas.values()].filter((name) => !ran.has(name));
    expect(never).toEqual([]);
    expect(shas.size).toBeGreaterThanOrEqual(20);
  });

  it('control: a script that touches a key it did not declare is caught', async () => {
    const server = await startRedis();
    const watch = await monitorServer(server.url);
    const client = new Redis(server.url);
    await client.eval(
      "redis.call('GET', KEYS[1]); return redis.call('EXISTS', KEYS[1] .. ':other')",
      1,
      'lock:{k}',
    );
    client.disconnect();
    const runs = scriptRuns(await watch.stop(), shas);
    expect(await undeclaredKeys(server, runs)).toEqual([
      'eval: EXISTS touches lock:{k}:other, not in KEYS',
    ]);
  });
});
