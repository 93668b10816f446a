/**
 * An `iovalkey` client (the Valkey project's fork of ioredis) passed as the `redis` option works as
 * an ioredis one does: grants, busy answers, extension, watchdog renewal, a waiter woken by the
 * release message (over a connection duplicated from the user's client), fair mode, read locks,
 * permits, multi-key locks, inspection — and it excludes an ioredis-based instance on the same
 * keys, as two replicas with different clients would. The user's client stays open at close. On a
 * Cluster, an iovalkey `Cluster` too. `npm test` runs it on the system Redis; the version matrix
 * runs it on every server it tests, Valkey 9.1.2 among them.
 */
import IoValkey, { Cluster as IoValkeyCluster } from 'iovalkey';
import type { LockService } from 'nestjs-redis-lock';
import { lockServices, warmedUp } from './support/lock-services';
import { onOwnCluster } from './support/own-cluster';
import { deleteKeys, redisClient, SHARED_REDIS_URL } from './support/shared-redis';
import { sleep } from './support/time';
import { uniquePrefix } from './support/unique-prefix';

const prefix = uniquePrefix('iovalkey');
const admin = redisClient();
const services = lockServices({ prefix });
const valkey = new IoValkey(SHARED_REDIS_URL);

afterAll(async () => {
  await services.closeAll();
  await deleteKeys(admin, prefix);
  await admin.quit();
  await valkey.quit();
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
  await permit.release();

  const pair = await locks.acquire(['pair:a', 'pair:b']);
  expect(await other.tryAcquire('pair:b')).toBeNull();
  await pair.release();
  expect(await other.isLocked('pair:a')).toBe(false);
}

describe('an iovalkey client as the redis option', () => {
  it('serves every kind, beside an ioredis-based instance on the same keys', async () => {
    const onValkey = await warmedUp(services.create({ redis: valkey }));
    const onIoredis = await warmedUp(services.create({ redis: SHARED_REDIS_URL }));
    await everyKind(onValkey, onIoredis);
    await everyKind(onIoredis, onValkey);
  });

  it('serves fair mode: a release hands the lock to the first in line', async () => {
    const holder = await warmedUp(services.create({ redis: valkey, fair: true }));
    const queued = await warmedUp(services.create({ redis: SHARED_REDIS_URL, fair: true }));
    const lock = await holder.acquire('fair');
    const first = queued.acquire('fair', { wait: 5_000 });
    await sleep(50);
    expect(await holder.tryAcquire('fair')).toBeNull(); // the queue's head comes first
    await lock.release();
    await (await first).release();
  });

  it('leaves the client open at close', async () => {
    const locks = services.create({ redis: valkey });
    await (await locks.acquire('closing')).release();
    await locks.close();
    expect(await valkey.ping()).toBe('PONG');
  });
});

describe('an iovalkey Cluster client as the redis option', () => {
  const cluster = onOwnCluster('iovalkey-cluster');
  let client: IoValkeyCluster | undefined;
  afterAll(() => client?.disconnect());

  it('serves every kind on a Cluster, beside an ioredis Cluster client', async () => {
    client = new IoValkeyCluster(cluster.topology.startupNodes);
    const onValkey = await warmedUp(cluster.service({ redis: client, cluster: undefined }));
    const onIoredis = await warmedUp(cluster.service());
    await everyKind(onValkey, onIoredis);
  });
});
