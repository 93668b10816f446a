import type { MemoryLockBackend } from '../../lib/backends/memory.backend';
import type { HeldLock } from '../../lib/engine/held-lock';
import type { LockOperations } from '../../lib/engine/lock-operations';
import type { Watchdog } from '../../lib/engine/watchdog';
import type { LockLostError } from '../../lib/errors/lock-lost.error';

/**
 * The engine operations of held locks for unit specs: leases on the in-memory backend, renewal by
 * `watchdog`, losses collected in `lost`, no drift.
 */
export function memoryOperations(
  backend: MemoryLockBackend,
  watchdog: Watchdog,
  lost: LockLostError[] = [],
): LockOperations<HeldLock> {
  return {
    extendLease: (lock, ms) => backend.extend(lock.redisKeys, lock.token, ms),
    releaseLease: (lock) => backend.release(lock.redisKeys, lock.token),
    untrack: (lock) => watchdog.remove(lock),
    drift: () => 0,
    reportLost: (_lock, error) => void lost.push(error),
    reportReleased: () => undefined,
    rescheduled: (lock) => watchdog.reschedule(lock),
  };
}
