/**
 * Redlock under restarts, late nodes and slow nodes, on 3 real `redis-server` primaries (each also
 * reachable through a TCP proxy): a node that restarted empty does not vote for a grant until the
 * longest lease has passed; renewals re-create a held lock on nodes that lost it; fences keep
 * increasing when a late node seeds its counter higher; a quorum missed for lack of answers is
 * "unavailable", not "busy".
 */
import { Logger } from '@nestjs/common';
import type Redis from 'ioredis';
import {
  LockNotAcquiredError,
  LockService,
  RedisUnavailableError,
  type LockHandle,
  type RedlockOptions,
} from 'nestjs-redis-lock';
import { lockServices, redisKeyOf } from '../support/lock-services';
import type { RedisServer } from '../support/redis-server';
import { closeAllProxies, startTcpProxy, type TcpProxy } from '../support/tcp-proxy';
import { sleep, waitFor } from '../support/time';
import {
  nodeClient,
  nodeCommand,
  parseInfo,
  startIndependentPrimaries,
} from '../support/topologies';
import { uniquePrefix } from '../support/unique-prefix';

const prefix = uniquePrefix('redlock-repair');
const services = lockServices({ prefix });
/** Long enough to outlast a restart and the acquire that follows it, short enough to wait out. */
const restartGrace = 1_000;
let nodes: RedisServer[];
let proxies: TcpProxy[];
let clients: Redis[];

/** A LockService over the 3 nodes, directly or through the proxies. */
function redlockService(redlock: Partial<RedlockOptions> = {}, viaProxies = false): LockService {
  const urls = (viaProxies ? proxies : nodes).map((target) => target.url);
  // Built as a variable: the options object passes through untouched whatever this version knows.
  const options = { nodes: urls, nodeTimeout: 200, restartGrace, ...redlock };
  return services.create({ redlock: options });
}

const keyOf = (key: string): string => redisKeyOf(prefix, key);
const valuesOn = (key: string): Promise<(string | null)[]> =>
  Promise.all(clients.map((client) => client.get(keyOf(key))));

/** SIGKILL, then a fresh empty process on the same port (no persistence), as after a crash. */
async function crashAndRestart(node: RedisServer): Promise<void> {
  await node.kill();
  await node.restart();
}

const uptime = async (node: RedisServer): Promise<number> =>
  Number(parseInfo(String(await nodeCommand(node.port, 'INFO', 'server'))).uptime_in_seconds);

/**
 * Until every node votes again: a (re)started node counts as restarted for `restartGrace` (1 s)
 * after the start the library infers from its uptime — whole seconds, so up to 1 s later than the
 * real one — and the library learns of a restart when it reconnects. 3 s covers all of it.
 */
const allVoting = (): Promise<void> =>
  waitFor(async () => (await Promise.all(nodes.map(uptime))).every((s) => s >= 3), 6_000, 100);

/**
 * Until a renewal reached a node that came back: the library's client reconnects on ioredis'
 * backoff (up to 2 s between tries after a long outage) and renews every ttl / 3, and both stretch
 * on a loaded machine. The wait ends as soon as the key is back; the bound only catches a repair
 * that never comes.
 */
const repairBound = 8_000;

/**
 * Whether node `i` holds `key` as `token`'s lease, marked as waited for or not: the contender's
 * try that C missed while down sits in ioredis' offline queue, runs once C is back, and marks
 * the repaired lease there as any refused try does.
 */
const ownedOn = async (i: number, key: string, token: string): Promise<boolean> =>
  (await clients[i]!.get(keyOf(key)))?.replace(/^\*/, '') === token;

beforeAll(async () => {
  // Unreachable and restarted nodes make the library log failed renewals on purpose.
  jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  nodes = await startIndependentPrimaries(3);
  proxies = await Promise.all(nodes.map((node) => startTcpProxy(node.port)));
  clients = nodes.map((node) => nodeClient(node.port));
  await allVoting();
});

// A test that restarted a node leaves it voting again for the next one.
afterEach(() => allVoting());

afterAll(async () => {
  await services.closeAll();
  await closeAllProxies();
  clients?.forEach((client) => client.disconnect());
  await Promise.all((nodes ?? []).map((node) => node.stop()));
  jest.restoreAllMocks();
});

describe('Redlock across node restarts', () => {
  it('does not count the vote of a node that restarted empty within restartGrace', async () => {
    const [, , c] = clients;
    const key = 'restart-vote';
    // Another holder's stale key on C runs out while H holds the lock on A and B.
    await c!.set(keyOf(key), 'stale', 'PX', 800);
    const holder = await redlockService().acquire(key, { ttl: 10_000, renew: false });
    // (C refused it, and so holds the stale key marked as waited for.)
    expect(await valuesOn(key)).toEqual([holder.token, holder.token, '*stale']);
    await waitFor(async () => (await c!.exists(keyOf(key))) === 0, 2_000);
    // B crashes and comes back empty: only A still has H's key.
    await crashAndRestart(nodes[1]!);
    expect(await valuesOn(key)).toEqual([holder.token, null, null]);

    // B and C are free; B's yes must not count while B may have forgotten a live lease.
    const contender = redlockService();
    const outcome = await contender.tryAcquire(key).catch((error: unknown) => error);
    expect(outcome).toBeInstanceOf(RedisUnavailableError);
    expect(holder.isHeld).toBe(true);
    // The refused attempt left nothing of the contender's behind (A's lease, refused, is marked
    // as waited for: still the holder's).
    expect(await valuesOn(key)).toEqual([`*${holder.token}`, null, null]);
    await holder.release();
  });

  it('re-creates a held lock on a node that restarted empty, so one more failure keeps it', async () => {
    const key = 'repair-restart';
    const holder = redlockService();
    const other = redlockService();
    const lock = await holder.acquire(key, { ttl: 1_200 });
    expect(await valuesOn(key)).toEqual([lock.token, lock.token, lock.token]);
    await crashAndRestart(nodes[1]!);
    // The next renewals (every ttl / 3) must put the key back on B.
    await waitFor(() => ownedOn(1, key, lock.token), repairBound);
    expect(lock.isHeld).toBe(true);
    await allVoting(); // B's vote counts again

    // Now C crashes too: A and B still form a quorum.
    await nodes[2]!.kill();
    try {
      await sleep(2_000); // longer than the lease: only renewals on A and B keep it
      expect(lock.isHeld).toBe(true);
      expect(await other.tryAcquire(key).catch((error: unknown) => error)).toBeNull();
    } finally {
      await nodes[2]!.restart();
    }
    // C comes back empty and is repaired as well.
    await waitFor(() => ownedOn(2, key, lock.token), repairBound);
    expect(await lock.release()).toBe(true);
    // The release counts once a quorum answered: a node slower than nodeTimeout (200 ms) deletes
    // a moment later — still well before the lease it holds (≥ 800 ms left) could run out there.
    const cleared = async () => (await valuesOn(key)).every((value) => value === null);
    await waitFor(cleared, 600, 20).catch(() => undefined); // the next line shows what is left
    expect(await valuesOn(key)).toEqual([null, null, null]);
  });

  it('does not re-create the key on any node once the lock is lost', async () => {
    const key = 'no-resurrection';
    const lock = await redlockService().acquire(key, { ttl: 900 });
    // Another holder takes over A and B behind our back (an operator, a bug): we lost the quorum.
    await Promise.all([0, 1].map((i) => clients[i]!.set(keyOf(key), 'other', 'PX', 5_000)));
    await clients[2]!.del(keyOf(key));
    await waitFor(() => lock.signal.aborted, 2_000);
    await sleep(100); // room for any clean-up the renewal sent
    expect(await valuesOn(key)).toEqual(['other', 'other', null]);
  });
});

describe('Redlock without INFO', () => {
  it('warns, and lets the nodes vote, when the Redis user may not run INFO', async () => {
    await Promise.all(
      nodes.map((node) =>
        nodeCommand(
          node.port,
          'ACL',
          'SETUSER',
          'no-info',
          'on',
          'nopass',
          '~*',
          '&*',
          '+@all',
          '-info',
        ),
      ),
    );
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    warn.mockClear();
    // ioredis' own ready check says it skipped INFO, on the console.
    jest.spyOn(console, 'warn').mockImplementation(() => undefined);
    const urls = nodes.map((node) => `redis://no-info@127.0.0.1:${node.port}`);
    const locks = services.create({ redlock: { nodes: urls, nodeTimeout: 200, restartGrace } });
    const lock = await locks.acquire('no-info');
    expect(await lock.release()).toBe(true);
    expect(warn.mock.calls.map(([message]) => String(message)).join('\n')).toMatch(/\+info/);
  });
});

describe('Redlock fences', () => {
  const fenceOn = async (i: number, key: string): Promise<number> =>
    Number(await clients[i]!.get(`${keyOf(key)}:fence`));

  it('keep increasing when a node that missed the first grant seeds its counter later', async () => {
    const key = 'fence-late-node';
    const locks = redlockService({}, true);
    const fences: number[] = [];
    const grant = async (): Promise<void> => {
      const lock: LockHandle = await locks.acquire(key, { renew: false });
      fences.push(lock.fence);
      expect(await lock.release()).toBe(true);
    };

    proxies[2]!.blackhole(); // C misses the key's first grant
    await grant(); // on A and B
    // The held-back acquire now runs on C: its counter starts from the clock reading that grant's
    // token carries, as A's and B's did — never below the fence it got there.
    proxies[2]!.heal();
    await waitFor(async () => (await fenceOn(2, key)) > 0, 2_000);
    expect(await fenceOn(2, key)).toBeGreaterThanOrEqual(fences[0]!);

    proxies[0]!.blackhole();
    await grant(); // on B and C: each counts up from there
    proxies[0]!.heal();
    proxies[2]!.blackhole();
    await grant(); // on A and B again
    proxies[2]!.heal();
    await grant(); // on all three

    expect(fences).toEqual([...fences].sort((x, y) => x - y));
    expect(new Set(fences).size).toBe(fences.length);
  });
});

describe('Redlock with a slow node', () => {
  afterEach(() => proxies.forEach((proxy) => proxy.setLatency(0)));

  it('answers RedisUnavailableError, not "busy", when a slow node leaves no validity on a free key', async () => {
    const locks = redlockService({ nodeTimeout: 200 }, true);
    await (await locks.acquire('slow:warm-up')).release(); // connections open, scripts loaded
    proxies[2]!.setLatency(150); // a 300 ms round trip to C
    const outcome = await locks.acquire('slow', { ttl: 200 }).catch((error: unknown) => error);
    expect(outcome).not.toBeInstanceOf(LockNotAcquiredError);
    expect(outcome).toBeInstanceOf(RedisUnavailableError);
    proxies[2]!.setLatency(0);
    // Nothing was left behind: the key is free for the next caller.
    await waitFor(async () => (await valuesOn('slow')).every((value) => value === null), 2_000);
  });

  it('warns at startup when ttl leaves too little room for nodeTimeout and drift', () => {
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    warn.mockClear();
    services.create({ ttl: 200, redlock: { nodes: nodes.map((n) => n.url), nodeTimeout: 200 } });
    expect(warn.mock.calls.map(([message]) => String(message)).join('\n')).toMatch(/nodeTimeout/);
    warn.mockClear();
    services.create({ ttl: 30_000, redlock: { nodes: nodes.map((n) => n.url), nodeTimeout: 200 } });
    expect(warn.mock.calls.map(([message]) => String(message)).join('\n')).not.toMatch(
      /nodeTimeout/,
    );
  });
});
