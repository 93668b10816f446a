import type Redis from 'ioredis';
import { threadId } from 'node:worker_threads';

/**
 * The naive Redis locks that the mission names, written the way they are found in the wild, so
 * each guarantee test can show that it fails on them (and so that the test can fail at all).
 * Test code only: never a pattern to copy.
 */

/** SETNX, then EXPIRE: a holder that dies between the two leaves a lock with no TTL. */
export async function setnxThenExpire(redis: Redis, key: string, ttlMs: number): Promise<boolean> {
  if ((await redis.setnx(key, 'holder')) !== 1) return false;
  await redis.pexpire(key, ttlMs);
  return true;
}

/** SET NX PX once, never renewed: the lease runs out while slow work still runs. */
export async function setWithoutRenewal(redis: Redis, key: string, ttlMs: number) {
  const granted = (await redis.set(key, 'holder', 'PX', ttlMs, 'NX')) === 'OK';
  return granted;
}

/** Release by plain DEL: deletes whoever holds the key now. */
export async function releaseByDel(redis: Redis, key: string): Promise<void> {
  await redis.del(key);
}

/**
 * Release by GET, compare, then DEL in two round trips: `between` runs in the gap, where the
 * lease can expire and another holder take the key.
 */
export async function releaseGetThenDel(
  redis: Redis,
  key: string,
  owner: string,
  between: () => Promise<void>,
): Promise<void> {
  if ((await redis.get(key)) !== owner) return;
  await between();
  await redis.del(key);
}

/** An owner id from the thread id: 0 on the main thread of every Node process. */
export const threadOwnerId = (): string => `thread-${threadId}`;

/** Compare-and-delete by owner id (atomic, but only as unique as the id). */
export async function releaseIfOwner(redis: Redis, key: string, owner: string): Promise<boolean> {
  const script =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";
  return (await redis.eval(script, 1, key, owner)) === 1;
}

/**
 * Expiry decided by the client's wall clock: the value is the holder's `Date.now() + ttl`, and a
 * contender whose clock says that moment has passed takes the key over.
 */
export async function acquireByClientClock(
  redis: Redis,
  key: string,
  ttlMs: number,
): Promise<boolean> {
  const expiresAt = Date.now() + ttlMs;
  if ((await redis.set(key, String(expiresAt), 'NX')) === 'OK') return true;
  const current = Number(await redis.get(key));
  if (current > Date.now()) return false;
  await redis.set(key, String(expiresAt));
  return true;
}

/** Waits for a busy lock by polling SET NX every `intervalMs`; `afterMiss` runs after each miss. */
export async function acquireByPolling(
  redis: Redis,
  key: string,
  ttlMs: number,
  intervalMs: number,
  afterMiss: () => void = () => undefined,
): Promise<void> {
  while ((await redis.set(key, 'poller', 'PX', ttlMs, 'NX')) !== 'OK') {
    afterMiss();
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
