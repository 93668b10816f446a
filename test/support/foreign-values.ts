import type { Cluster, Redis } from 'ioredis';
import type { LockHandle, LockLostError, LockService } from 'nestjs-redis-lock';
import { redisKeyOf } from './lock-services';

/** The kinds of lock a watchdog batch can mix. */
export const KINDS = ['mutex', 'read', 'semaphore'] as const;
export type Kind = (typeof KINDS)[number];

/** Takes `key` as a lock of `kind` (a semaphore of 3 permits). */
export function acquireKind(locks: LockService, key: string, kind: Kind): Promise<LockHandle> {
  if (kind === 'read') return locks.acquire(key, { mode: 'read' });
  if (kind === 'semaphore') return locks.acquire(key, { permits: 3 });
  return locks.acquire(key);
}

/** Every Redis name a held lock of `kind` on `key` is renewed under (under `prefix`). */
export function renewedNamesOf(prefix: string, key: string, kind: Kind): string[] {
  const lock = redisKeyOf(prefix, key);
  if (kind === 'read') return [lock, `${lock}:readers:holders`, `${lock}:fence`];
  if (kind === 'semaphore') {
    const permits = `${lock}:permits`; // its companions; the permits are the lock's own name
    return [lock, `${permits}:limit`, `${permits}:fence`, `${permits}:holders`];
  }
  return [lock, `${lock}:fence`, `${lock}:holder`];
}

/**
 * Replaces what `name` holds by another application's value of another type (a hash where a string
 * was, a string where a hash or a sorted set was), so the lock's commands on it meet WRONGTYPE.
 */
export async function writeForeignValue(admin: Redis | Cluster, name: string): Promise<void> {
  const type = await admin.type(name);
  await admin.del(name);
  if (type === 'string') await admin.hset(name, 'field', 'foreign');
  else await admin.set(name, 'foreign');
}

/**
 * The outcome of a lock after its batch met a foreign value: held, or lost and why. A lock whose
 * own name holds the foreign value must be lost as `'not-owner'`; any other must stay held.
 */
export function outcomeOf(lock: LockHandle): string {
  return lock.isHeld ? 'held' : `lost:${(lock.signal.reason as LockLostError).reason}`;
}
