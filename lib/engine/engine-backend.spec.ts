import type { LockBackend } from '../backends/lock-backend';
import type { ReleasePubSub } from '../redis/release-pubsub';
import { RedisLockConfigError } from '../errors/redis-lock-config.error';
import type { LockRedisKeys } from '../keys/lock-keys';
import { resolveOptions } from '../options/resolve-options';
import { LockEngine } from './lock-engine';

/** Just enough of a backend to take and free one lock in memory: no pub/sub, no expiry. */
function memoryBackend(): LockBackend {
  const holders = new Map<string, string>();
  let fence = 0;
  const pubSub: ReleasePubSub = {
    subscribe: async () => undefined,
    unsubscribe: async () => undefined,
    onMessage: () => undefined,
    onError: () => undefined,
    close: () => undefined,
  };
  const owns = (keys: LockRedisKeys, token: string): boolean => holders.get(keys.lock) === token;
  return {
    acquire: async (keys, token, ttl) => {
      if (holders.has(keys.lock)) return -ttl;
      holders.set(keys.lock, token);
      return ++fence;
    },
    extend: async (keys, token) => owns(keys, token),
    renewMany: async (leases) => leases.map((lease) => owns(lease.redisKeys, lease.token)),
    release: async (keys, token) => owns(keys, token) && holders.delete(keys.lock),
    forceRelease: async (keys) => holders.delete(keys.lock),
    isLocked: async (keys) => holders.has(keys.lock),
    evict: async (keys) =>
      holders.delete(keys.lock) ? { kind: 'exclusive', fence, count: 1, removed: {} } : null,
    inspectRaw: async (keys) => {
      const token = holders.get(keys.lock) ?? null;
      return { token, pttl: token ? 10_000 : -2, fence, holder: null, waiters: [] };
    },
    scan: async () => ({ names: [...holders.keys()] }),
    createPubSub: () => pubSub,
    drift: () => 0,
    close: async () => undefined,
  };
}

const request = { key: 'k', ttl: 10_000, wait: 0, maxHold: Infinity, renew: false };

describe('LockEngine on a backend it is given', () => {
  it('runs without Redis when given a backend without connections', async () => {
    const engine = new LockEngine(resolveOptions({ startupCheck: 'off' }), {
      backend: memoryBackend(),
    });
    const first = await engine.acquire(request);
    expect('lock' in first && first.lock.fence).toBe(1);
    expect(await engine.acquire(request)).toEqual({ retryAfterMs: 10_000, waited: 0 });
    expect(await engine.inspection.isLocked('k')).toBe(true);
    if ('lock' in first) expect(await first.lock.release()).toBe(true);
    expect(await engine.inspection.isLocked('k')).toBe(false);
    await engine.close();
  });

  it('refuses fair mode, when constructed, on a backend without the fair-mode commands', () => {
    const options = resolveOptions({ fair: true, startupCheck: 'off' });
    expect(() => new LockEngine(options, { backend: memoryBackend() })).toThrow(
      RedisLockConfigError,
    );
  });
});
