/**
 * A node-redis v5 client (the `redis` package) passed as the `redis` option works as an ioredis
 * one does: grants, busy answers, extension, watchdog renewal, a waiter woken by the release
 * message (over a connection duplicated from the user's client), fair mode, read locks, permits,
 * multi-key locks, inspection and listing — and it excludes an ioredis-based instance on the same
 * keys, as two replicas with different clients would. The user's client stays open at close, and
 * shutdown releases what is held.
 * Beside those: the EVAL fallback after SCRIPT FLUSH, `replicaAck` (WAIT through node-redis), a
 * node-redis `createCluster()` client, and the startup refusals (a Sentinel client; no client
 * package installed, in a process of its own where neither can be loaded).
 */
import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { Logger } from '@nestjs/common';
import type { Cluster, Redis } from 'ioredis';
import {
  LockLostError,
  LockService,
  RedisLockConfigError,
  RedisUnavailableError,
  type RedisConnectionOption,
} from 'nestjs-redis-lock';
import { createClient, createClientPool, createCluster, createSentinel } from 'redis';
import { wrapNodeRedis } from '../lib/redis/node-redis-client';
import { lockServices, warmedUp } from './support/lock-services';
import { onOwnCluster } from './support/own-cluster';
import { startRedis, stopAllRedis } from './support/redis-server';
import { deleteKeys, redisClient, SHARED_REDIS_URL } from './support/shared-redis';
import { sleep, waitFor } from './support/time';
import { nodeCommand } from './support/topologies';
import { uniquePrefix } from './support/unique-prefix';

const prefix = uniquePrefix('node-redis');
const admin = redisClient();
const services = lockServices({ prefix });
const nodeRedis = createClient({ url: SHARED_REDIS_URL });
nodeRedis.on('error', () => undefined);
/** A value the option's type refuses, passed anyway, as plain JavaScript could. */
const asOption = (client: unknown): RedisConnectionOption => client as RedisConnectionOption;

beforeAll(() => nodeRedis.connect());

afterAll(async () => {
  await services.closeAll();
  await deleteKeys(admin, prefix);
  await admin.quit();
  await nodeRedis.close();
  await stopAllRedis();
});

/** The operations of every kind, through `locks`, with `other` (another instance) as the rival. */
async function everyKind(locks: LockService, other: LockService): Promise<void> {
  const mutex = await locks.acquire('mutex', { ttl: 600 });
  expect(await other.tryAcquire('mutex')).toBeNull();
  await mutex.extend(5_000);
  await sleep(350); // watchdog renewals (every lease / 3) keep it
  expect(mutex.isHeld).toBe(true);
  const waiter = other.acquire('mutex', { wait: 5_000 });
  await sleep(30);
  const released = performance.now();
  await mutex.release();
  const next = await waiter;
  // Woken by the release message, not by its fallback retry (the lease had ~4.6 s left).
  expect(performance.now() - released).toBeLessThan(2_000);
  await next.release();

  const reader = await locks.acquire('doc', { mode: 'read' });
  expect((await other.tryAcquire('doc', { mode: 'read' }))?.isHeld).toBe(true);
  expect(await other.tryAcquire('doc')).toBeNull();
  await reader.release();

  const permit = await locks.acquire('pool', { permits: 1 });
  expect(await other.tryAcquire('pool', { permits: 1 })).toBeNull();
  expect((await other.inspect('pool')).kind).toBe('semaphore');
  expect((await locks.list()).locks.map((lock) => lock.key)).toContain('pool');
  await permit.release();

  const pair = await locks.acquire(['pair:a', 'pair:b']);
  expect(await other.tryAcquire('pair:b')).toBeNull();
  await pair.release();
  expect(await other.isLocked('pair:a')).toBe(false);
}

/**
 * Subscribes to a channel, unsubscribes, and subscribes again before the UNSUBSCRIBE's reply —
 * as a waiter that gives up and the next one on that name do — then publishes: what was heard.
 * node-redis, unsubscribed by channel name, saw the channel as still subscribed, sent nothing,
 * and dropped it when that reply landed: the waiter slept to its fallback (the engine contract
 * caught a wake-up 1.2 s late on a loaded machine).
 */
async function heardAfterResubscribing(
  subscriber: Redis | Cluster,
  mode: 'classic' | 'sharded',
  publish: (channel: string, message: string) => Promise<unknown>,
): Promise<string[]> {
  const channel = `${prefix}:resubscribed:${mode}`;
  const heard: string[] = [];
  const [subscribe, unsubscribe, event] =
    mode === 'classic'
      ? (['subscribe', 'unsubscribe', 'message'] as const)
      : (['ssubscribe', 'sunsubscribe', 'smessage'] as const);
  subscriber.on(event, (_channel: string, message: string) => heard.push(message));
  try {
    await subscriber[subscribe](channel);
    const leaving = subscriber[unsubscribe](channel);
    await subscriber[subscribe](channel);
    await leaving;
    await publish(channel, 'released');
    await waitFor(() => heard.length > 0, 2_000);
    return heard;
  } finally {
    subscriber.disconnect();
  }
}

describe('a node-redis client as the redis option', () => {
  it('serves every kind, beside an ioredis-based instance on the same keys', async () => {
    const onNodeRedis = await warmedUp(services.create({ redis: nodeRedis }));
    const onIoredis = await warmedUp(services.create({ redis: SHARED_REDIS_URL }));
    await everyKind(onNodeRedis, onIoredis);
    await everyKind(onIoredis, onNodeRedis);
  });

  it('serves fair mode: a release hands the lock to the first in line', async () => {
    const holder = await warmedUp(services.create({ redis: nodeRedis, fair: true }));
    const queued = await warmedUp(services.create({ redis: nodeRedis, fair: true }));
    const lock = await holder.acquire('fair');
    const first = queued.acquire('fair', { wait: 5_000 });
    await sleep(50);
    expect(await holder.tryAcquire('fair')).toBeNull(); // the queue's head comes first
    await lock.release();
    await (await first).release();
  });

  it('keeps a channel subscribed again while its unsubscribe is still in flight', async () => {
    const subscriber = wrapNodeRedis(nodeRedis.duplicate(), true) as Redis;
    const heard = await heardAfterResubscribing(subscriber, 'classic', (channel, message) =>
      admin.publish(channel, message),
    );
    expect(heard).toEqual(['released']);
  });

  it('leaves the client open at close', async () => {
    const locks = services.create({ redis: nodeRedis });
    const held = await locks.acquire('closing');
    const waiter = locks.acquire('closing', { wait: 2_000 }); // subscribes, on a duplicate
    await sleep(50);
    await held.release();
    await (await waiter).release();
    await locks.close();
    expect(await nodeRedis.ping()).toBe('PONG');
  });

  it('at shutdown aborts and releases what it holds, and a waiter elsewhere gets in', async () => {
    const closing = services.create({ redis: nodeRedis, shutdownGrace: 0 });
    const other = await warmedUp(services.create({ redis: nodeRedis }));
    const lock = await closing.acquire('shutdown', { ttl: 10_000 });
    const waiter = other.acquire('shutdown', { wait: 5_000 });
    await sleep(50);
    await closing.close();
    expect((lock.signal.reason as LockLostError).reason).toBe('shutdown');
    // Woken by the release at close, long before the 10 s lease would have ended.
    const next = await waiter;
    expect(next.isHeld).toBe(true);
    await next.release();
  });

  it('falls back to EVAL when the server forgot the scripts (SCRIPT FLUSH)', async () => {
    const server = await startRedis();
    const client = createClient({ url: server.url });
    client.on('error', () => undefined);
    await client.connect();
    try {
      const locks = services.create({ redis: client });
      await (await locks.acquire('flushed')).release(); // the scripts are cached now
      await nodeCommand(server.port, 'SCRIPT', 'FLUSH');
      // The control: the server no longer knows a script the lock ran, so EVALSHA alone fails.
      const sha = String(await client.sendCommand(['SCRIPT', 'LOAD', 'return 1']));
      await nodeCommand(server.port, 'SCRIPT', 'FLUSH');
      await expect(client.sendCommand(['EVALSHA', sha, '0'])).rejects.toThrow(/^NOSCRIPT/);
      const again = await locks.acquire('flushed');
      expect(again.isHeld).toBe(true);
      await again.release();
      await locks.close();
    } finally {
      await client.close();
      await server.stop();
    }
  });

  it('waits for replicas (replicaAck) through node-redis, and fails without them', async () => {
    jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    const diskless = ['--repl-diskless-sync', 'yes', '--repl-diskless-sync-delay', '0'];
    const [primary, lonely] = await Promise.all([startRedis({ args: diskless }), startRedis()]);
    const replica = await startRedis({
      args: [
        '--replicaof',
        '127.0.0.1',
        String(primary.port),
        '--repl-diskless-load',
        'on-empty-db',
      ],
    });
    await waitFor(
      async () =>
        /master_link_status:up/.test(
          String(await nodeCommand(replica.port, 'INFO', 'replication')),
        ),
      10_000,
      20,
    );
    const replicated = createClient({ url: primary.url });
    const alone = createClient({ url: lonely.url });
    for (const client of [replicated, alone]) client.on('error', () => undefined);
    await Promise.all([replicated.connect(), alone.connect()]);
    try {
      const replicaAck = { minReplicas: 1, timeout: 2_000 };
      const acknowledged = services.create({ redis: replicated, replicaAck });
      const lock = await acknowledged.acquire('acked', { wait: 5_000 });
      expect(lock.isHeld).toBe(true);
      await lock.release();
      // The control: no replica to acknowledge, so the same grant is refused and rolled back.
      const unacknowledged = services.create({
        redis: alone,
        replicaAck: { minReplicas: 1, timeout: 200 },
      });
      await expect(unacknowledged.acquire('acked')).rejects.toBeInstanceOf(RedisUnavailableError);
      expect(await alone.exists(`${prefix}{acked}`)).toBe(0);
      await acknowledged.close();
      await unacknowledged.close();
    } finally {
      await Promise.all([replicated.close(), alone.close()]);
      await Promise.all([replica.stop(), primary.stop(), lonely.stop()]);
    }
  });

  it('refuses a node-redis Sentinel client or client pool at startup, saying what to pass', () => {
    const sentinel = createSentinel({
      name: 'mymaster',
      sentinelRootNodes: [{ host: '127.0.0.1', port: 1 }],
    });
    expect(() => new LockService({ redis: asOption(sentinel), prefix })).toThrow(
      RedisLockConfigError,
    );
    expect(() => new LockService({ redis: asOption(sentinel), prefix })).toThrow(/Sentinel/);
    const pool = createClientPool({ url: SHARED_REDIS_URL });
    expect(() => new LockService({ redis: asOption(pool), prefix })).toThrow(
      /Pass a `createClient\(\)` or `createCluster\(\)` client/,
    );
  });
});

describe('a node-redis Cluster client as the redis option', () => {
  const cluster = onOwnCluster('node-redis-cluster');
  let client: ReturnType<typeof createCluster>;
  beforeAll(async () => {
    client = createCluster({
      rootNodes: cluster.topology.startupNodes.map(({ host, port }) => ({
        url: `redis://${host}:${port}`,
      })),
    });
    client.on('error', () => undefined);
    await client.connect();
  });
  afterAll(() => client.close());

  it('serves every kind on a Cluster, beside an ioredis Cluster client', async () => {
    const onNodeRedis = await warmedUp(cluster.service({ redis: client, cluster: undefined }));
    const onIoredis = await warmedUp(cluster.service());
    await everyKind(onNodeRedis, onIoredis);
    await everyKind(onIoredis, onNodeRedis);
  });

  it('keeps a channel subscribed again while its unsubscribe is in flight (sharded from Redis 7)', async () => {
    // The pub/sub the lock uses on this Cluster: sharded, or classic before Redis 7 (no SSUBSCRIBE).
    const sharded = cluster.topology.shardedPubSub;
    const subscriber = wrapNodeRedis(client.duplicate(), true) as Cluster;
    const heard = await heardAfterResubscribing(
      subscriber,
      sharded ? 'sharded' : 'classic',
      (channel, message) =>
        sharded ? client.sPublish(channel, message) : client.publish(channel, message),
    );
    expect(heard).toEqual(['released']);
  });
});

describe('which client the library opens itself', () => {
  const root = resolve(__dirname, '..');
  /** Runs `script` in a fresh process where the named packages cannot be loaded. */
  const run = (hidden: string[], script: string): Promise<{ code: number; out: string }> =>
    new Promise((done) => {
      const hide =
        `const M = require('module'); const resolve = M._resolveFilename; ` +
        `M._resolveFilename = function (request, ...rest) { ` +
        `if (${JSON.stringify(hidden)}.includes(request)) { const e = new Error("Cannot find module '" + request + "'"); e.code = 'MODULE_NOT_FOUND'; throw e; } ` +
        `return resolve.call(this, request, ...rest); };`;
      execFile(
        process.execPath,
        ['-r', './tools/ts-register.js', '-e', `${hide}\n${script}`],
        { cwd: root, env: { ...process.env, REDIS_URL: SHARED_REDIS_URL }, timeout: 20_000 },
        (error, stdout, stderr) =>
          done({
            code: error ? Number((error as { code?: unknown }).code ?? 1) : 0,
            out: stdout + stderr,
          }),
      );
    });

  it('fails at startup, naming the packages to install, when neither is installed', async () => {
    const script =
      `const { LockService } = require('./lib'); ` +
      `try { new LockService({ redis: process.env.REDIS_URL }); console.log('opened'); } ` +
      `catch (e) { console.log(e.constructor.name + ': ' + e.message); }`;
    const { out } = await run(['ioredis', 'redis'], script);
    expect(out).toMatch(/^RedisLockConfigError: .*npm install ioredis.*npm install redis/m);
    // The control: with node-redis there, the same options open a connection and lock.
    const opened = await run(
      ['ioredis'],
      `const { LockService } = require('./lib'); ` +
        `const locks = new LockService({ redis: process.env.REDIS_URL, prefix: '${prefix}' }); ` +
        `locks.acquire('alone', { wait: 5000 }).then(async (l) => { console.log('held ' + l.isHeld); ` +
        `await l.release(); await locks.close(); }, (e) => { console.log('failed ' + e.message); process.exit(1); });`,
    );
    expect(opened.out).toMatch(/^held true$/m);
  });

  it('runs the CLI on node-redis when ioredis is not installed', async () => {
    const locks = services.create({ redis: nodeRedis, instanceId: 'cli-on-node-redis' });
    const lock = await locks.acquire('listed');
    const { out } = await run(
      ['ioredis'],
      `process.argv.splice(1, Infinity, 'nestjs-redis-lock', 'ls', '--prefix', '${prefix}'); ` +
        `require('./lib/cli/main');`,
    );
    expect(out).toMatch(/^listed\s+exclusive\s+1\s+\d+\s+\d+\s+cli-on-node-redis\s/m);
    await lock.release();
  });
});
