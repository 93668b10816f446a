/**
 * `extend()` by a stale holder, through LockService on the shared Redis: a handle whose key was
 * deleted and retaken behind its back, while its own deadline (a long ttl, `renew: false`) says
 * it still holds the lock. Its `extend()` is not answered locally, so it reaches Redis: the
 * compare-and-pexpire must refuse it (the token is not the holder's), leave the new owner's lease
 * as it was, and tell the stale handle it lost the lock. One case per kind: a mutex, a reader's
 * share, a permit.
 */
import { LockLostError, type LockHandle } from 'nestjs-redis-lock';
import { onSharedRedis } from './support/lock-services';

const { redis, services, keyOf } = onSharedRedis('stale-extend');
/** The stale holder's lease: far beyond the test, so its local deadline never passes. */
const STALE_TTL = 60_000;
/** The new owner's lease: what the stale extension must not touch. */
const NEW_TTL = 2_000;

/**
 * Calls `stale.extend(60 s)` and checks what the issue names: it rejects with LockLostError
 * (`not-owner`), the handle no longer says it holds the lock, and `ttlKey` (the new owner's key)
 * has no more than the new owner's lease left.
 */
async function expectRefused(stale: LockHandle, ttlKey: string): Promise<void> {
  expect(stale.isHeld).toBe(true); // it still believes it holds the lock: Redis is asked
  const before = await redis.pttl(ttlKey);
  expect(before).toBeGreaterThan(0);
  expect(before).toBeLessThanOrEqual(NEW_TTL);
  const error = await stale.extend(STALE_TTL).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(LockLostError);
  expect(error).toMatchObject({ reason: 'not-owner' });
  expect(stale.isHeld).toBe(false);
  const after = await redis.pttl(ttlKey);
  expect(after).toBeGreaterThan(0);
  expect(after).toBeLessThanOrEqual(before); // unchanged: only time went by
}

describe('extend() by a holder whose lock was deleted and retaken', () => {
  it('a mutex: rejects with LockLostError (not-owner), leaves the new owner its 2 s lease', async () => {
    const [old, other] = [services.create(), services.create()];
    const stale = await old.acquire('mutex', { ttl: STALE_TTL, renew: false });
    expect(await redis.del(keyOf('mutex'))).toBe(1); // behind its back
    const owner = await other.acquire('mutex', { ttl: NEW_TTL, renew: false });
    await expectRefused(stale, keyOf('mutex'));
    expect(await redis.get(keyOf('mutex'))).toBe(owner.token);
    expect(owner.isHeld).toBe(true);
    expect(await stale.release()).toBe(false);
    expect(await owner.release()).toBe(true);
  });

  it("a reader's share: rejects with LockLostError (not-owner), leaves the new reader's lease and the readers' TTL", async () => {
    const [old, other] = [services.create(), services.create()];
    const readers = keyOf('read');
    const stale = await old.acquire('read', { mode: 'read', ttl: STALE_TTL, renew: false });
    expect(await redis.del(readers)).toBe(1); // behind its back
    const owner = await other.acquire('read', { mode: 'read', ttl: NEW_TTL, renew: false });
    const ownerEnds = await redis.zscore(readers, owner.token);
    await expectRefused(stale, readers);
    // The stale share did not come back, and the new one's lease end did not move.
    expect(await redis.zrange(readers, 0, -1)).toEqual([owner.token]);
    expect(await redis.zscore(readers, owner.token)).toBe(ownerEnds);
    expect(owner.isHeld).toBe(true);
    expect(await stale.release()).toBe(false);
    expect(await owner.release()).toBe(true);
  });

  it("a permit: rejects with LockLostError (not-owner), leaves the new holder's lease and the permits' TTL", async () => {
    const [old, other] = [services.create(), services.create()];
    const permits = keyOf('permit'); // the permits hold the lock's own name
    const options = { permits: 2, renew: false } as const;
    const stale = await old.acquire('permit', { ...options, ttl: STALE_TTL });
    expect(await redis.del(permits)).toBe(1); // behind its back
    const owner = await other.acquire('permit', { ...options, ttl: NEW_TTL });
    const ownerEnds = await redis.zscore(permits, owner.token);
    await expectRefused(stale, permits);
    expect(await redis.zrange(permits, 0, -1)).toEqual([owner.token]);
    expect(await redis.zscore(permits, owner.token)).toBe(ownerEnds);
    expect(owner.isHeld).toBe(true);
    expect(await stale.release()).toBe(false);
    expect(await owner.release()).toBe(true);
  });
});
