/**
 * Redlock mode over 3 and 5 independent `redis-server` primaries: a grant needs a
 * quorum (N/2+1) — checked for every subset of nodes pre-occupied by a foreign holder — a failed
 * attempt leaves nothing of ours behind, a held lock survives a minority of nodes dying and is
 * reported lost when a majority dies, and separate processes never overlap.
 */
import { Logger } from '@nestjs/common';
import type Redis from 'ioredis';
import {
  LockLostError,
  LockService,
  RedisUnavailableError,
  type RedisLockModuleOptions,
} from 'nestjs-redis-lock';
import { CONNECT_BUDGET, lockServices, redisKeyOf, warmedUp } from '../support/lock-services';
import { killAllWorkers } from '../support/processes';
import type { RedisServer } from '../support/redis-server';
import { deleteKeys, redisClient } from '../support/shared-redis';
import { now, sleep, waitFor } from '../support/time';
import { nodeClient, startIndependentPrimaries } from '../support/topologies';
import { uniquePrefix } from '../support/unique-prefix';
import { startRacers } from './exclusion-race';

const prefix = uniquePrefix('redlock');
const services = lockServices({ prefix });
const shared = redisClient();
let nodes: RedisServer[];
let clients: Redis[];

// restartGrace 0: these nodes are fresh, and the tests restart them and lock on them again at
// once (redlock-repair.e2e-spec.ts tests the grace itself).
const redlockOptions = (count: number): RedisLockModuleOptions => ({
  redlock: {
    nodes: nodes.slice(0, count).map((node) => node.url),
    nodeTimeout: 200,
    restartGrace: 0,
  },
});

/**
 * A LockService over the first `count` nodes: what one app instance would own. Connected first
 * (warmedUp): a test's first call has only the 200 ms nodeTimeout on every node.
 */
const redlockService = (
  count: number,
  options: RedisLockModuleOptions = {},
): Promise<LockService> => warmedUp(services.create({ ...redlockOptions(count), ...options }));

const range = (count: number): number[] => Array.from({ length: count }, (_, i) => i);

/** Kills `victims`, runs `fn`, then restarts them (empty, as a crashed node without AOF comes back). */
async function withNodesDown<T>(victims: RedisServer[], fn: () => Promise<T>): Promise<T> {
  await Promise.all(victims.map((node) => node.kill()));
  try {
    return await fn();
  } finally {
    await Promise.all(victims.map((node) => node.restart()));
    await waitFor(() => clients.every((client) => client.status === 'ready'), 5_000);
  }
}

beforeAll(async () => {
  // Dead nodes make the library log failed renewals and losses on purpose.
  jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  nodes = await startIndependentPrimaries(5);
  clients = nodes.map((node) => nodeClient(node.port));
});

afterAll(async () => {
  await services.closeAll();
  await killAllWorkers();
  clients?.forEach((client) => client.disconnect());
  await Promise.all((nodes ?? []).map((node) => node.stop()));
  await deleteKeys(shared, prefix);
  await shared.quit();
  jest.restoreAllMocks();
});

describe('Redlock over independent primaries', () => {
  describe.each([3, 5])('with %i nodes', (count) => {
    const quorum = Math.floor(count / 2) + 1;
    const minority = count - quorum;

    it('acquires iff the free nodes form a quorum, for every subset of pre-occupied nodes', async () => {
      const locks = await redlockService(count);
      const expected: string[] = [];
      const actual: string[] = [];
      for (let mask = 0; mask < 2 ** count; mask++) {
        const key = `subset:${count}:${mask}`;
        const lease = redisKeyOf(prefix, key);
        const occupied = range(count).map((i) => (mask & (1 << i)) !== 0);
        await Promise.all(
          range(count)
            .filter((i) => occupied[i])
            .map((i) => clients[i]!.set(lease, 'foreign', 'PX', 30_000)),
        );
        const free = occupied.filter((taken) => !taken).length;
        const label = occupied.map((taken) => (taken ? 'X' : '.')).join('');
        expected.push(`${label} ${free >= quorum ? 'granted' : 'refused'}`);

        const lock = await locks.tryAcquire(key);
        actual.push(`${label} ${lock ? 'granted' : 'refused'}`);
        // Foreign holders keep their lease, only marked as waited for (their release then wakes
        // waiters); free nodes hold our token only when granted.
        const values = await Promise.all(range(count).map((i) => clients[i]!.get(lease)));
        expect(values).toEqual(
          occupied.map((taken) => (taken ? '*foreign' : (lock?.token ?? null))),
        );
        if (lock) {
          expect(await lock.release()).toBe(true);
          const after = await Promise.all(range(count).map((i) => clients[i]!.get(lease)));
          expect(after).toEqual(occupied.map((taken) => (taken ? '*foreign' : null)));
        }
      }
      expect(actual).toEqual(expected);
    });

    it('wakes a waiter through the release message, long before the holder’s lease ends', async () => {
      const holder = await redlockService(count);
      const waiter = await redlockService(count);
      const held = await holder.acquire(`hand-off:${count}`, { ttl: 20_000 });
      const waiting = waiter.acquire(`hand-off:${count}`, { wait: 15_000 });
      await sleep(100);
      const released = now();
      expect(await held.release()).toBe(true);
      const next = await waiting;
      expect(now() - released).toBeLessThan(1_000);
      expect(await next.release()).toBe(true);
    });

    it(`keeps a held lock when a minority (${minority}) of nodes dies: renewal and extend() succeed`, async () => {
      const locks = await redlockService(count);
      const other = await redlockService(count);
      const key = `minority:${count}`;
      const lock = await locks.acquire(key, { ttl: 1_200 });
      await withNodesDown(nodes.slice(quorum, count), async () => {
        // Longer than the lease: only renewals on the surviving quorum keep it.
        await sleep(2_000);
        expect(lock.signal.aborted).toBe(false);
        expect(lock.isHeld).toBe(true);
        await lock.extend(1_200);
        expect(await other.tryAcquire(key)).toBeNull();
        expect(await lock.release()).toBe(true);
        const next = await other.tryAcquire(key);
        expect(next).not.toBeNull();
        expect(await next!.release()).toBe(true);
      });
    });

    it(`reports the lock lost when a majority (${quorum}) of nodes dies`, async () => {
      const locks = await redlockService(count);
      const lostEvents: string[] = [];
      locks.on('lost', (_error, lock) => lostEvents.push(lock.key));
      const key = `majority:${count}`;
      const lock = await locks.acquire(key, { ttl: 900 });
      await withNodesDown(nodes.slice(count - quorum, count), async () => {
        await waitFor(() => lock.signal.aborted, 3_000);
        expect(lock.signal.reason).toBeInstanceOf(LockLostError);
        expect(lostEvents).toEqual([key]);
        expect(await lock.release()).toBe(false);
      });
    });

    it('treats a majority outage as unreachable (reason "deadline"), not as another owner', async () => {
      const locks = await redlockService(count);
      const lock = await locks.acquire(`outage:${count}`, { ttl: 900 });
      await withNodesDown(nodes.slice(count - quorum, count), async () => {
        await waitFor(() => lock.signal.aborted, 3_000);
        // Nobody said "not yours": the nodes just did not answer, as with one unreachable Redis.
        expect((lock.signal.reason as LockLostError).reason).toBe('deadline');
      });
    });

    it('fails with RedisUnavailableError, not "busy", while a majority of nodes is unreachable', async () => {
      const locks = await redlockService(count);
      await withNodesDown(nodes.slice(count - quorum, count), async () => {
        // Nobody holds the key: a refusal here means "could not reach a quorum", not "busy".
        await expect(locks.acquire(`unreachable:${count}`)).rejects.toBeInstanceOf(
          RedisUnavailableError,
        );
      });
    });
  });

  it('keeps the handle’s deadline within the Redlock validity, ttl − elapsed − drift', async () => {
    const driftFactor = 0.2;
    const locks = services.create({
      redlock: { nodes: nodes.slice(0, 3).map((node) => node.url), driftFactor, restartGrace: 0 },
    });
    const ttl = 1_000;
    // Connections open, scripts loaded; a budget to connect in (nodeTimeout bounds each node).
    await (await locks.acquire('validity:warm-up', CONNECT_BUDGET)).release();
    const lock = await locks.acquire('validity', { ttl, renew: false });
    const granted = now();
    // The grant was checked against ttl·driftFactor + 2 ms of drift; the handle must not
    // believe it holds the lock longer than that check allowed.
    expect(lock.validUntil).toBeLessThanOrEqual(granted + ttl - (ttl * driftFactor + 2));
    await lock.release();
  });

  // Last on purpose: it also gives clients of nodes restarted above time to reconnect before
  // afterAll closes them (ioredis arms a 2 s timer when disconnecting a reconnecting client).
  it('lets no two processes overlap on a shared counter over 5 nodes (the unlocked control loses updates)', async () => {
    const racers = await startRacers(3, 100, prefix, redlockOptions(5));
    try {
      expect(await racers.race('locked', true)).toBe(racers.expected);
      expect(await racers.race('unlocked', false)).toBeLessThan(racers.expected);
    } finally {
      await racers.close();
    }
  });
});
