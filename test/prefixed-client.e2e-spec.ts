/**
 * An ioredis client of the application's own, created with `keyPrefix`: ioredis prefixes every
 * key the lock scripts touch (the release channel included, which the scripts publish on), so
 * the lock's keys live under that prefix, and waiters must listen on the prefixed channel to be
 * woken by a release instead of by their fallback timer.
 */
import Redis, { Cluster } from 'ioredis';
import { LockService } from 'nestjs-redis-lock';
import { deleteKeys, redisClient, SHARED_REDIS_URL } from './support/shared-redis';
import { sleep } from './support/time';
import { nodeClient, startCluster, type RedisClusterTopology } from './support/topologies';
import { uniquePrefix } from './support/unique-prefix';

const keyPrefix = uniquePrefix('prefixed-client');
const clients: Redis[] = [];
const services: LockService[] = [];
const plain = redisClient();

/** A LockService on its own prefixed client, as a separate app instance would have. */
function instance(options: { fair?: boolean; commandTimeout?: number } = {}): LockService {
  const client = new Redis(SHARED_REDIS_URL, { keyPrefix, maxRetriesPerRequest: 1 });
  clients.push(client);
  const service = new LockService({ redis: client, prefix: 'lock:', ...options });
  services.push(service);
  return service;
}

afterAll(async () => {
  await Promise.all(services.map((service) => service.close()));
  await Promise.all(clients.map((client) => client.quit()));
  await deleteKeys(plain, keyPrefix);
  await plain.quit();
});

describe('a user-supplied client with keyPrefix', () => {
  it('keeps every lock key under the client prefix: acquire, extend, isLocked, fence, release', async () => {
    const locks = instance();
    const lock = await locks.acquire('keys', { ttl: 5_000 });
    expect(await plain.get(`${keyPrefix}lock:{keys}`)).toBe(lock.token);
    expect(Number(await plain.get(`${keyPrefix}lock:{keys}:fence`))).toBe(lock.fence);
    await lock.extend(8_000);
    expect(await plain.pttl(`${keyPrefix}lock:{keys}`)).toBeGreaterThan(5_000);
    expect(await locks.isLocked('keys')).toBe(true);
    expect(await lock.release()).toBe(true);
    expect(await plain.exists(`${keyPrefix}lock:{keys}`)).toBe(0);
    expect(await locks.isLocked('keys')).toBe(false);
    const again = await locks.acquire('keys');
    expect(await locks.forceRelease('keys')).toBe(true);
    expect(await plain.exists(`${keyPrefix}lock:{keys}`)).toBe(0);
    expect(await again.release()).toBe(false);
  });

  for (const fair of [false, true]) {
    it(`wakes a waiter in another instance by the release message${fair ? ' (fair mode)' : ''}`, async () => {
      // A long commandTimeout makes fair waiters refresh their queue entry (and so find a missed
      // hand-off) only every 4 s.
      const holders = instance({ fair, commandTimeout: 6_000 });
      const waiters = instance({ fair, commandTimeout: 6_000 });
      const key = `wake-${fair ? 'fair' : 'plain'}`;
      const holder = await holders.acquire(key, { ttl: 20_000 });
      // Without the message the waiter sleeps until its budget ends (6 s; the holder's lease is
      // longer) or, in fair mode, its next refresh; woken by it, it acquires right after the release.
      const waiting = waiters.acquire(key, { wait: 6_000 });
      await sleep(100); // subscribed and asleep
      expect(await holder.release()).toBe(true);
      const first = await Promise.race([
        waiting.then(() => 'woken by the release'),
        sleep(3_000).then(() => 'still asleep'),
      ]);
      expect(first).toBe('woken by the release');
      expect(await (await waiting).release()).toBe(true);
    });
  }

  it('inspects, lists and evicts through the client prefix: keys come back without either prefix', async () => {
    const locks = instance();
    const lock = await locks.acquire('listed', { ttl: 5_000 });
    expect(await locks.inspect('listed')).toMatchObject({ held: true, fence: lock.fence });
    const page = await locks.list({ count: 100 });
    expect(page.locks.map((entry) => entry.key)).toContain('listed');
    expect(await locks.evict('listed')).toMatchObject({ fence: lock.fence });
    expect(
      await plain.exists(`${keyPrefix}lock:{listed}`, `${keyPrefix}lock:{listed}:holder`),
    ).toBe(0);
    await lock.release().catch(() => undefined);
  });
});

describe('a user-supplied Cluster client with keyPrefix', () => {
  let topology: RedisClusterTopology | undefined;
  const cluster: Cluster[] = [];
  const onCluster: LockService[] = [];

  afterAll(async () => {
    await Promise.all(onCluster.map((service) => service.close()));
    cluster.forEach((client) => client.disconnect());
    await topology?.stop();
  });

  it('wakes a waiter in another instance by the sharded release message', async () => {
    topology = await startCluster({ primaries: 3, replicasPerPrimary: 0 });
    const instanceOnCluster = (): LockService => {
      const client = new Cluster(topology!.startupNodes, { keyPrefix: 'app:' });
      cluster.push(client);
      const service = new LockService({ redis: client });
      onCluster.push(service);
      return service;
    };
    const holders = instanceOnCluster();
    const waiters = instanceOnCluster();
    const holder = await holders.acquire('wake', { ttl: 20_000 });
    const waiting = waiters.acquire('wake', { wait: 6_000 });
    await sleep(200); // subscribed and asleep
    expect(await holder.release()).toBe(true);
    const first = await Promise.race([
      waiting.then(() => 'woken by the release'),
      sleep(3_000).then(() => 'still asleep'),
    ]);
    expect(first).toBe('woken by the release');
    const lock = await waiting;
    const node = nodeClient((await topology.shardOf('app:lock:{wake}')).primary.port);
    expect(await node.get('app:lock:{wake}')).toBe(lock.token); // under the client's prefix
    node.disconnect();
    expect(await lock.release()).toBe(true);
  });
});
