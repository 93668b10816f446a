/**
 * A LockService given the application's own ioredis client leaves it open at close, and takes
 * back every listener it added to it: services that come and go on one long-lived client (one
 * per tenant, per test, per hot reload) must not pile listeners up on it.
 */
import Redis from 'ioredis';
import { LockService } from 'nestjs-redis-lock';
import { hostProcess } from './support/host-process';
import { stopAllRedis } from './support/redis-server';
import { deleteKeys, redisClient } from './support/shared-redis';
import { startIndependentPrimaries } from './support/topologies';
import { uniquePrefix } from './support/unique-prefix';

const prefix = uniquePrefix('user-client');
const client = redisClient();

const nodeClients: Redis[] = [];

afterAll(async () => {
  await deleteKeys(client, prefix);
  await client.quit();
  nodeClients.forEach((node) => node.disconnect());
  await stopAllRedis();
});

/** How many listeners `of` has, per event. */
const listenerCounts = (of: Redis = client): Record<string, number> =>
  Object.fromEntries(of.eventNames().map((name) => [name, of.listenerCount(name)]));

it('takes back every listener it added to your client at close, and leaves the client open', async () => {
  await client.ping();
  const before = listenerCounts();
  const warnings: string[] = [];
  const onWarning = (warning: Error): void => void warnings.push(warning.name);
  hostProcess.on('warning', onWarning);
  try {
    for (let i = 0; i < 12; i++) {
      const locks = new LockService({ redis: client, prefix });
      const lock = await locks.acquire(`tenant-${i}`);
      expect(await lock.release()).toBe(true);
      await locks.close();
    }
    expect(listenerCounts()).toEqual(before);
    expect(warnings).not.toContain('MaxListenersExceededWarning');
    expect(await client.ping()).toBe('PONG');
  } finally {
    hostProcess.off('warning', onWarning);
  }
});

it('takes back its listeners from your clients of Redlock nodes too', async () => {
  const servers = await startIndependentPrimaries(3);
  nodeClients.push(...servers.map((server) => new Redis(server.url)));
  await Promise.all(nodeClients.map((node) => node.ping()));
  const before = nodeClients.map((node) => listenerCounts(node));
  for (let i = 0; i < 3; i++) {
    const locks = new LockService({ redlock: { nodes: nodeClients, restartGrace: 1 }, prefix });
    const lock = await locks.acquire(`redlock-${i}`, { wait: 2_000 }); // once the nodes vote
    expect(await lock.release()).toBe(true);
    await locks.close();
  }
  expect(nodeClients.map((node) => listenerCounts(node))).toEqual(before);
});
