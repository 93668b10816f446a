import type { LockBackend } from '../backends/lock-backend';
import { REDLOCK } from '../backends/store-capabilities';
import type { ReleasePubSub } from '../redis/release-pubsub';
import { RedisLockConfigError } from '../errors/errors';
import type { LockRedisKeys } from '../keys/lock-keys';
import { resolveOptions } from '../options/resolve-options';
import { LockEngine } from './lock-engine';

/**
 * Just enough of a backend to take and free one lock in memory: no pub/sub, no expiry, exclusive
 * locks only (it has no fair-mode commands, and says so).
 */
function memoryBackend(close: () => Promise<void> = async () => undefined): LockBackend {
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
    capabilities: { ...REDLOCK, store: 'a fake' },
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
    close,
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

  it('refuses fair mode, when constructed, on a store that does not serve it', () => {
    const options = resolveOptions({ fair: true, startupCheck: 'off' });
    const create = () => new LockEngine(options, { backend: memoryBackend() });
    expect(create).toThrow(RedisLockConfigError);
    expect(create).toThrow(/`fair` is "set with a fake"/);
    // A store that claims fair mode without the commands is refused all the same.
    const claims = { ...memoryBackend(), capabilities: { ...REDLOCK, fair: true } };
    expect(() => new LockEngine(options, { backend: claims })).toThrow(/no fair-mode commands/);
  });

  it('refuses a kind of lease the store does not serve, before the store is asked', () => {
    const backend = memoryBackend();
    const acquire = jest.spyOn(backend, 'acquire');
    const engine = new LockEngine(resolveOptions({ startupCheck: 'off' }), { backend });
    expect(() => engine.assertServes({ type: 'semaphore', permits: 2 })).toThrow(/Semaphores/);
    expect(() => engine.assertServes({ type: 'read' })).toThrow(/Read locks/);
    expect(() => engine.assertServes({ type: 'exclusive' })).not.toThrow();
    expect(acquire).not.toHaveBeenCalled();
  });

  it('closes the store only when it was made for the service (closedByService)', async () => {
    const options = resolveOptions({ startupCheck: 'off' });
    const kept = jest.fn(async () => undefined);
    await new LockEngine(options, { backend: memoryBackend(kept) }).close();
    expect(kept).not.toHaveBeenCalled();
    const ours = jest.fn(async () => undefined);
    await new LockEngine(options, { backend: memoryBackend(ours), closedByService: true }).close();
    expect(ours).toHaveBeenCalledTimes(1);
  });
});
