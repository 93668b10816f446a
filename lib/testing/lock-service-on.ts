import type { EngineBackend } from '../engine/lock-engine';
import type { RedisLockModuleOptions } from '../options/redis-lock-options';
import { withGivenBackend } from '../service/given-backend';
import { LockService } from '../service/lock.service';

/** A LockService on `backend` (the in-memory one) instead of a Redis connection. @internal */
export function lockServiceOn(
  backend: EngineBackend,
  options: RedisLockModuleOptions = {},
): LockService {
  return withGivenBackend(backend, () => new LockService(options));
}
