import type { MemoryLockBackend } from '../../lib/backends/memory.backend';
import { HeldLock } from '../../lib/engine/held-lock';
import type { LockOperations } from '../../lib/engine/lock-operations';
import type { Watchdog } from '../../lib/engine/watchdog';
import type { LockLostError } from '../../lib/errors/errors';
import { lockRedisKeys } from '../../lib/keys/lock-keys';

/** How a spec's fake engine extends and releases a lease. */
export interface LeaseCommands {
  extend(lock: HeldLock, ms: number): Promise<boolean>;
  release(lock: HeldLock): Promise<boolean>;
}

/**
 * The engine operations of held locks for unit specs: leases through `commands`, renewal by
 * `watchdog`, losses collected in `lost`, a fixed drift margin (default none).
 */
export function fakeOperations(
  commands: LeaseCommands,
  watchdog: Watchdog,
  lost: LockLostError[] = [],
  drift = 0,
): LockOperations<HeldLock> {
  return {
    extendLease: (lock, ms) => commands.extend(lock, ms),
    releaseLease: (lock, settle) => commands.release(lock).then(settle),
    releaseTogether: (release) => release(),
    untrack: (lock) => watchdog.remove(lock),
    drift: () => drift,
    reportLost: (_lock, error) => void lost.push(error),
    reportReleased: () => undefined,
    reportReleaseFailed: () => undefined,
    rescheduled: (lock) => watchdog.reschedule(lock),
  };
}

/** The lease commands of the in-memory backend. */
export function memoryCommands(backend: MemoryLockBackend): LeaseCommands {
  return {
    extend: (lock, ms) => backend.extend(lock.redisKeys, lock.token, ms),
    release: (lock) => backend.release(lock.redisKeys, lock.token),
  };
}

/** `fakeOperations` on the in-memory backend. */
export function memoryOperations(
  backend: MemoryLockBackend,
  watchdog: Watchdog,
  lost: LockLostError[] = [],
): LockOperations<HeldLock> {
  return fakeOperations(memoryCommands(backend), watchdog, lost);
}

/**
 * Acquires `key` (token `token-<key>`) on the in-memory backend, as sent at `startedAt`, and
 * hands the lock to the watchdog.
 */
export async function holdOnMemory(
  backend: MemoryLockBackend,
  operations: LockOperations<HeldLock>,
  watchdog: Watchdog,
  { key, lease = 600, startedAt = Date.now() }: { key: string; lease?: number; startedAt?: number },
): Promise<HeldLock> {
  const redisKeys = lockRedisKeys('lock:', key);
  const token = `token-${key}`;
  const fence = await backend.acquire(redisKeys, token, lease);
  const lock = new HeldLock({
    operations,
    key,
    redisKeys,
    token,
    fence,
    lease,
    startedAt,
    owner: {},
  });
  watchdog.add(lock);
  return lock;
}
