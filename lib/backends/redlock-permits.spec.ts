import { RedisLockConfigError } from '../errors/redis-lock-config.error';
import { lockRedisKeys } from '../keys/lock-keys';
import type { QuorumNode } from './redlock-node';
import { RedlockBackend } from './redlock.backend';

describe('RedlockBackend and semaphores', () => {
  it('refuses a permit lease with RedisLockConfigError before asking any node', async () => {
    const acquire = jest.fn();
    const node = { acquire } as unknown as QuorumNode;
    const backend = new RedlockBackend([node, node, node], 100, 0.01, 10_000);
    const keys = lockRedisKeys('p:', 'export', { type: 'semaphore', permits: 3 });
    const refused = backend.acquire(keys, 'token', 10_000);
    await expect(refused).rejects.toBeInstanceOf(RedisLockConfigError);
    await expect(refused).rejects.toThrow(/Semaphores \(`permits`\) need one Redis or a Cluster/);
    expect(acquire).not.toHaveBeenCalled();
  });
});
