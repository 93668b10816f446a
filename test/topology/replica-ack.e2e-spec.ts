/**
 * `replicaAck` on real `redis-server` processes: a primary with one replica, and a lone primary
 * behind a TCP proxy that a test re-points at the other primary mid-`WAIT`, as a failover does.
 * An acknowledgement counts only when it answers the connection that wrote the grant, and grants
 * that wait for replicas never hold up the renewals and releases of other locks.
 */
import { Logger } from '@nestjs/common';
import { LockService, RedisUnavailableError, type LockHandle } from 'nestjs-redis-lock';
import { lockServices, redisKeyOf } from '../support/lock-services';
import { startRedis, stopAllRedis, type RedisServer } from '../support/redis-server';
import { closeAllProxies, startTcpProxy } from '../support/tcp-proxy';
import { now, sleep, waitFor } from '../support/time';
import { nodeClient, nodeCommand, waitForReplication } from '../support/topologies';
import { uniquePrefix } from '../support/unique-prefix';

const prefix = uniquePrefix('replica-ack');
const services = lockServices({ prefix });
/** A primary with one connected replica. */
let primary: RedisServer;
let replica: RedisServer;
/** A primary without replicas: `WAIT 1` blocks there until its timeout. */
let lonely: RedisServer;

interface Settled<T> {
  value?: T;
  error?: unknown;
}
const settle = <T>(promise: Promise<T>): Promise<Settled<T>> =>
  promise.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );

beforeAll(async () => {
  jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  const diskless = ['--repl-diskless-sync', 'yes', '--repl-diskless-sync-delay', '0'];
  [primary, lonely] = await Promise.all([startRedis({ args: diskless }), startRedis()]);
  replica = await startRedis({
    // Loads the sync stream in memory: no dump.rdb written to the working directory.
    args: ['--replicaof', '127.0.0.1', String(primary.port), '--repl-diskless-load', 'on-empty-db'],
  });
  await waitFor(
    async () =>
      /master_link_status:up/.test(String(await nodeCommand(replica.port, 'INFO', 'replication'))),
    10_000,
    20,
  );
  // Replication flows (a write is acknowledged at once), so a test's first grant does not wait
  // for the replica's settling after its initial sync.
  const client = nodeClient(primary.port);
  try {
    await waitFor(
      async () => {
        await client.set(`${prefix}probe`, '1');
        return Number(await client.wait(1, 200)) === 1;
      },
      10_000,
      0,
    );
  } finally {
    client.disconnect();
  }
}, 30_000);

afterAll(async () => {
  await services.closeAll();
  await closeAllProxies();
  await stopAllRedis();
  jest.restoreAllMocks();
});

describe('replicaAck: whose acknowledgement counts', () => {
  it('a WAIT re-sent after a reset, to another primary, does not count: unavailable, no second holder', async () => {
    // The client reaches `lonely` through the proxy: its grant lands there and WAIT blocks.
    const proxy = await startTcpProxy(lonely.port);
    const holder = services.create({
      redis: proxy.url,
      replicaAck: { minReplicas: 1, timeout: 3_000 },
      commandTimeout: 6_000,
    });
    const waitSent = proxy.onCommand(
      (args) => args[0] === 'wait',
      'request',
      () => undefined,
    );
    const acquired = settle(holder.acquire('resent', { ttl: 10_000 }));
    await waitSent;
    await sleep(100);
    expect(await nodeCommand(lonely.port, 'EXISTS', redisKeyOf(prefix, 'resent'))).toBe(1);
    // A failover: the connection drops and the reconnect lands on `primary`, which never had the
    // grant but has a replica, so a re-sent WAIT there answers 1 at once.
    proxy.retarget(primary.port);
    proxy.resetConnections();
    const outcome = await acquired;

    const rival = await services.create({ redis: primary.url }).tryAcquire('resent');
    const holders = [outcome.value?.isHeld === true, rival?.isHeld === true].filter(Boolean);
    expect(holders).toHaveLength(1);
    expect(outcome.error).toBeInstanceOf(RedisUnavailableError);
    await rival?.release();
  });
});

describe('replicaAck: a stalled replica', () => {
  it('never delays renewals, extend() and releases of held locks while grants wait for it', async () => {
    const locks = services.create({
      redis: primary.url,
      replicaAck: { minReplicas: 1, timeout: 1_500 },
    });
    const held: LockHandle = await locks.acquire('stall:held', { ttl: 600 });
    const other: LockHandle = await locks.acquire('stall:other', { ttl: 5_000 });
    await waitForReplication(primary.port, replica.port);
    const order: string[] = [];
    replica.pause();
    try {
      const grants = ['a', 'b', 'c', 'd'].map((key) =>
        settle(locks.acquire(`stall:${key}`, { ttl: 5_000 })).then((outcome) => {
          order.push('acquire');
          return outcome;
        }),
      );
      await sleep(50);
      const asked = now();
      await held.extend(600);
      order.push('extend');
      const extendMs = now() - asked;
      expect(await other.release()).toBe(true);
      order.push('release');
      const outcomes = await Promise.all(grants);
      // Every grant waited its 1.5 s for the stalled replica (rolled back, unavailable); the
      // held lock answered its extension before any of them, and stayed held through renewals.
      for (const outcome of outcomes) expect(outcome.error).toBeInstanceOf(RedisUnavailableError);
      expect(order.slice(0, 2)).toEqual(['extend', 'release']);
      expect(extendMs).toBeLessThan(1_000);
      expect(held.signal.aborted).toBe(false);
    } finally {
      replica.resume();
    }
    expect(await held.release()).toBe(true);
  }, 30_000);
});

describe('replicaAck: its connections', () => {
  it('closes the connections it opened for grants when the service closes', async () => {
    const clients = async (): Promise<number> =>
      Number(/connected_clients:(\d+)/.exec(String(await nodeCommand(primary.port, 'INFO')))![1]);
    const before = await clients();
    const locks = new LockService({
      redis: primary.url,
      prefix,
      replicaAck: { minReplicas: 1, timeout: 1_000 },
    });
    const held = await Promise.all(['p', 'q'].map((key) => locks.acquire(`close:${key}`)));
    await Promise.all(held.map((lock) => lock.release()));
    // The service's own connection, its subscriber and at least one connection for grants.
    expect(await clients()).toBeGreaterThanOrEqual(before + 2);
    await locks.close();
    await waitFor(async () => (await clients()) <= before, 5_000, 20);
  });
});
