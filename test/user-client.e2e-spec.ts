/**
 * A LockService given the application's own ioredis client leaves it open at close, and takes
 * back every listener it added to it: services that come and go on one long-lived client (one
 * per tenant, per test, per hot reload) must not pile listeners up on it.
 */
import { LockService } from 'nestjs-redis-lock';
import { hostProcess } from './support/host-process';
import { deleteKeys, redisClient } from './support/shared-redis';
import { uniquePrefix } from './support/unique-prefix';

const prefix = uniquePrefix('user-client');
const client = redisClient();

afterAll(async () => {
  await deleteKeys(client, prefix);
  await client.quit();
});

/** How many listeners the client has, per event. */
const listenerCounts = (): Record<string, number> =>
  Object.fromEntries(client.eventNames().map((name) => [name, client.listenerCount(name)]));

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
