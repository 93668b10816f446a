import { Logger, type DynamicModule, type Provider } from '@nestjs/common';
import { MemoryLockBackend } from '../backends/memory.backend';
import type { LockStore } from '../engine/lock-engine';
import { LOCK_STORE } from '../module/lock-store';
import { RedisLockModule } from '../module/redis-lock.module';
import type { RedisLockModuleOptions } from '../options/redis-lock-options';

/**
 * The options of `RedisLockModule.forRoot()` without the connection ones: the locks live in this
 * process's memory, so there is nothing to connect to and nothing to check at startup.
 */
export type RedisLockTestingOptions = Omit<
  RedisLockModuleOptions,
  'redis' | 'cluster' | 'redlock' | 'replicaAck' | 'startupCheck'
> & {
  /** Whether every module of the app sees `LockService`, as with `RedisLockModule`. Default: true. */
  isGlobal?: boolean;
  /**
   * As in `RedisLockModule`, but 0 by default: `close()` aborts and releases at once what a test
   * left held (each gets its `'lost'` event, reason `'shutdown'`) instead of waiting 10 s, twice
   * Jest's 5 s hook timeout.
   * @default 0
   */
  shutdownGrace?: number;
};

const logger = new Logger('RedisLock');

/**
 * `RedisLockModule` for tests, with no Redis: the same module, `LockService` class, `@Locked`
 * binding and interceptor, its `LOCK_STORE` an in-memory store, one per `forRoot()` call. Same semantics in one
 * process — tokens, ttl expiry, renewal and the lost signal, waits woken by releases, fair order,
 * fences, `onBusy`, re-entrancy — and the same options, minus the connection ones.
 *
 * Locks in memory exclude nothing outside this process: created with `NODE_ENV=production`, it
 * logs a warning.
 *
 * @example
 * ```ts
 * const moduleRef = await Test.createTestingModule({
 *   imports: [RedisLockTestingModule.forRoot()],
 *   providers: [OrderService],
 * }).compile();
 * await moduleRef.init();
 *
 * // or, on a whole app module that imports `lockModule = RedisLockModule.forRoot(…)` (Nest
 * // matches a dynamic module by reference, so the app exports the one it imports):
 * Test.createTestingModule({ imports: [AppModule] })
 *   .overrideModule(lockModule)
 *   .useModule(RedisLockTestingModule.forRoot());
 * ```
 */
export class RedisLockTestingModule {
  /**
   * `RedisLockModule.forRoot(options)` itself — the same providers, exports and `@Locked`
   * binding — with its `LOCK_STORE` provider overridden by an in-memory store, one per call.
   */
  static forRoot(options: RedisLockTestingOptions = {}): DynamicModule {
    const serviceOptions: RedisLockModuleOptions & { isGlobal?: boolean } = {
      shutdownGrace: 0,
      ...options,
      startupCheck: 'off',
    };
    const memoryStore: Provider<LockStore> = {
      provide: LOCK_STORE,
      useFactory: () => {
        warnInProduction();
        const backend = new MemoryLockBackend({ fenceRetention: options.fenceRetention });
        // Made for the module's one LockService, which closes it as it would a Redis store.
        return { backend, closedByService: true };
      },
    };
    const real = RedisLockModule.forRoot(serviceOptions);
    // Nest lets a dynamic module's provider replace its class's provider of the same token.
    return { ...real, providers: [...(real.providers ?? []), memoryStore] };
  }
}

/** Loud, because in-memory locks in production exclude nothing across instances. */
function warnInProduction(): void {
  if (process.env.NODE_ENV !== 'production') return;
  logger.warn(
    'RedisLockTestingModule is in use with NODE_ENV=production: its locks live in this ' +
      "process's memory and exclude nothing in other processes. It is for tests only; use " +
      'RedisLockModule.forRoot() in production.',
  );
}
