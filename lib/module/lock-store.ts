import { Inject, Injectable, type OnApplicationShutdown, type Provider } from '@nestjs/common';
import { createLockStore, isUnclaimed, type LockStore } from '../engine/lock-engine';
import type { RedisLockModuleOptions } from '../options/redis-lock-options';
import { resolveOptions } from '../options/resolve-options';
import { REDIS_LOCK_OPTIONS } from './redis-lock.module-definition';

/**
 * The token `RedisLockModule` provides its lock store under, and its `LockService` is injected
 * with — as @nestjs/throttler injects its storage. `RedisLockTestingModule` provides the in-memory
 * store here; a test can `overrideProvider(LOCK_STORE)` the same way. From the global symbol
 * registry, as `LOCK_SOURCE`: two copies of the package in one process agree on it.
 */
export const LOCK_STORE = Symbol.for('nestjs-redis-lock:lock-store');

/**
 * The store the module's options describe (one Redis, Sentinel, a Cluster or Redlock), made for
 * the module's one `LockService`, which closes it last in its shutdown, after the drain: a hook of
 * its own would close it beside the service's, while held locks are still being released. Bad
 * options, and options the store cannot serve, stop the bootstrap here, before it connects.
 */
export const lockStoreProvider: Provider<LockStore> = {
  provide: LOCK_STORE,
  useFactory: (options: RedisLockModuleOptions) => createLockStore(resolveOptions(options)),
  inject: [REDIS_LOCK_OPTIONS],
};

/**
 * Closes the module's store at shutdown when its `LockService` never took it on — a test that
 * replaced the service with a double (`overrideProvider(LockService)`): nobody else would, and its
 * connection would keep the process alive. A store the service took on is left to the service.
 */
@Injectable()
export class UnclaimedStoreCloser implements OnApplicationShutdown {
  constructor(@Inject(LOCK_STORE) private readonly store: LockStore) {}

  async onApplicationShutdown(): Promise<void> {
    if (isUnclaimed(this.store)) await this.store.backend.close();
  }
}
