/**
 * The failure modes of naive Redis locks, each run twice: against the naive lock (the test must
 * catch it: proof the test can fail) and against ours (the guarantee must hold). On a private
 * redis-server, through a TCP proxy where a crash has to land between two commands.
 */
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import Redis from 'ioredis';
import { LockService, type LockLostError } from 'nestjs-redis-lock';
import {
  acquireByClientClock,
  acquireByPolling,
  releaseByDel,
  releaseGetThenDel,
  releaseIfOwner,
  setnxThenExpire,
  setWithoutRenewal,
  threadOwnerId,
} from './support/naive-locks';
import { startRedis, stopAllRedis, type RedisServer } from './support/redis-server';
import { closeAllProxies, startTcpProxy } from './support/tcp-proxy';
import { now, sleep } from './support/time';

const PREFIX = 'naive:';
const leaseKey = (key: string): string => `${PREFIX}{${key}}`;

let server: RedisServer;
let redis: Redis;
const services: LockService[] = [];
const clients: Redis[] = [];

function ours(url = server.url): LockService {
  const service = new LockService({ redis: url, prefix: PREFIX, commandTimeout: 1_000 });
  services.push(service);
  return service;
}

function naiveClient(url = server.url): Redis {
  const client = new Redis(url);
  client.on('error', () => undefined);
  clients.push(client);
  return client;
}

beforeAll(async () => {
  server = await startRedis();
  redis = new Redis(server.url);
});

afterAll(async () => {
  await Promise.all(services.map((service) => service.close()));
  clients.forEach((client) => client.disconnect());
  redis.disconnect();
  await closeAllProxies();
  await stopAllRedis();
});

describe('naive Redis lock failure modes: the naive lock breaks, ours holds', () => {
  it('SETNX then EXPIRE: a holder dying between the steps leaves a lock with no TTL (deadlock)', async () => {
    // The holder's connection dies right after its first lock command ran on Redis.
    const naiveProxy = await startTcpProxy(server.port);
    const crashed = naiveProxy.onCommand(
      (args) => args[0] === 'setnx',
      'reply',
      () => naiveProxy.resetConnections(),
    );
    void setnxThenExpire(naiveClient(naiveProxy.url), 'naive-crash', 1_000).catch(() => false);
    await crashed;
    expect(await redis.pttl('naive-crash')).toBe(-1); // no TTL: nobody ever gets it again

    const proxy = await startTcpProxy(server.port);
    const service = ours(proxy.url);
    await (await service.acquire('warm-up')).release(); // scripts loaded: the grant is one EVALSHA
    const granted = proxy.onCommand(
      (args) => args[0] === 'evalsha',
      'reply',
      () => proxy.resetConnections(),
    );
    const crash = service.acquire('crash', { ttl: 1_000 }).catch(() => null);
    await granted;
    const pttl = await redis.pttl(leaseKey('crash'));
    expect(pttl).toBeGreaterThan(0); // the very command that created the lock gave it its TTL
    expect(pttl).toBeLessThanOrEqual(1_000);
    // The re-sent command may still grant it: release it, or close() would wait for it to be.
    await (await crash)?.release();
  });

  it('no renewal: the lease runs out while slow work still runs, and a second holder gets in', async () => {
    const contender = async (take: () => Promise<boolean>, until: number): Promise<boolean> => {
      while (now() < until) {
        if (await take()) return true;
        await sleep(40);
      }
      return false;
    };
    const naive = naiveClient();
    expect(await setWithoutRenewal(naive, 'naive-slow', 300)).toBe(true);
    const naiveOverlap = await contender(
      () => setWithoutRenewal(naive, 'naive-slow', 300),
      now() + 1_000, // the holder's work takes 1 s
    );
    expect(naiveOverlap).toBe(true);

    const holder = ours();
    const other = ours();
    let overlap = false;
    await holder.withLock(
      'slow',
      async () => {
        overlap = await contender(async () => {
          const lock = await other.tryAcquire('slow', { ttl: 500 });
          await lock?.release();
          return lock !== null;
        }, now() + 1_000);
      },
      { ttl: 500 }, // the work outlasts two leases
    );
    expect(overlap).toBe(false); // renewed every ~167 ms while the work ran
  });

  it("unlock without an ownership check, or GET-then-DEL: a stale holder deletes the new owner's lock", async () => {
    const naive = naiveClient();
    // Plain DEL after the lease ran out and someone else took the key.
    await naive.set('naive-del', 'A', 'PX', 100, 'NX');
    await sleep(150);
    await naive.set('naive-del', 'B', 'PX', 5_000, 'NX');
    await releaseByDel(naive, 'naive-del');
    expect(await redis.get('naive-del')).toBeNull(); // B's lock is gone

    // GET, compare, DEL in two steps: the lease runs out between them.
    await naive.set('naive-getdel', 'A', 'PX', 100, 'NX');
    await releaseGetThenDel(naive, 'naive-getdel', 'A', async () => {
      await sleep(150);
      await naive.set('naive-getdel', 'B', 'PX', 5_000, 'NX');
    });
    expect(await redis.get('naive-getdel')).toBeNull(); // B's lock is gone

    const stale = await ours().acquire('owned', { ttl: 100, renew: false });
    await sleep(150);
    const current = await ours().acquire('owned', { ttl: 5_000 });
    expect(await stale.release()).toBe(false); // one atomic compare-and-delete: not ours any more
    expect(await redis.get(leaseKey('owned'))).toBe(current.token);
    await current.release();
  });

  it('thread ids as owner ids collide across processes; random tokens do not', async () => {
    const root = path.resolve(__dirname, '..');
    const run = (code: string, args: string[] = []): string =>
      execFileSync(process.execPath, [...args, '-e', code], { cwd: root, encoding: 'utf8' });

    const naive = naiveClient();
    await naive.set('naive-owner', threadOwnerId(), 'PX', 5_000, 'NX');
    const otherProcessId = `thread-${run("process.stdout.write(String(require('node:worker_threads').threadId))")}`;
    expect(otherProcessId).toBe(threadOwnerId()); // both processes are "thread 0"
    expect(await releaseIfOwner(naive, 'naive-owner', otherProcessId)).toBe(true); // deleted ours

    const lock = await ours().acquire('owner');
    const otherProcessToken = run("process.stdout.write(require('./lib/util/clock').newToken())", [
      '-r',
      './tools/ts-register.js',
    ]);
    expect(otherProcessToken).toMatch(/^[0-9a-f]{32}$/);
    expect(otherProcessToken).not.toBe(lock.token);
    expect(await releaseIfOwner(naive, leaseKey('owner'), otherProcessToken)).toBe(false);
    expect(await lock.release()).toBe(true);
  });

  it('client clocks deciding expiry: a contender whose clock runs ahead steals a live lock', async () => {
    const naive = naiveClient();
    expect(await acquireByClientClock(naive, 'naive-clock', 5_000)).toBe(true);
    const realNow = Date.now;
    const skewed = jest.spyOn(Date, 'now').mockImplementation(() => realNow() + 10_000);
    try {
      expect(await acquireByClientClock(naive, 'naive-clock', 5_000)).toBe(true); // stolen
    } finally {
      skewed.mockRestore();
    }

    const holder = await ours().acquire('clock', { ttl: 5_000 });
    const contender = ours();
    const ahead = jest.spyOn(Date, 'now').mockImplementation(() => realNow() + 10_000);
    try {
      expect(await contender.tryAcquire('clock')).toBeNull(); // Redis' PX decides, not our clock
      // The holder's own clock jumping ahead never lets anyone in; it may mean this host was
      // suspended past the lease, so the holder gives the lock up rather than trust it.
      expect(holder.isHeld).toBe(false);
      expect((holder.signal.reason as LockLostError).reason).toBe('clock-jump');
    } finally {
      ahead.mockRestore();
    }
    expect(await holder.release()).toBe(false);
  });

  it('polling every 100 ms: the hand-off waits for the next poll; ours is woken by the release', async () => {
    const naive = naiveClient();
    await naive.set('naive-poll', 'holder', 'PX', 5_000, 'NX');
    let releasedAt = 0;
    let released = false;
    await acquireByPolling(naive, 'naive-poll', 5_000, 100, () => {
      if (released) return;
      released = true;
      // Released just after a miss: the poller only notices at its next poll. Stamped before the
      // DEL is sent, so a stalled event loop can only make the gap look longer, never shorter.
      releasedAt = now();
      void naive.del('naive-poll');
    });
    const naiveGap = now() - releasedAt;

    // Ours, three times (the best counts: one stalled event loop must not fail the comparison).
    const ourGaps: number[] = [];
    for (let round = 0; round < 3; round++) {
      const holder = await ours().acquire('poll', { ttl: 30_000 });
      const waiting = ours().acquire('poll', { wait: 10_000 });
      await sleep(150); // the waiter is asleep (its fallback would be the 30 s lease)
      await holder.release();
      const ourReleasedAt = now();
      const next = await waiting;
      ourGaps.push(now() - ourReleasedAt);
      await next.release();
    }

    expect(naiveGap).toBeGreaterThan(90); // it waited for its next poll
    expect(Math.min(...ourGaps)).toBeLessThan(naiveGap / 2); // woken by the message: ~1 ms
  });
});
