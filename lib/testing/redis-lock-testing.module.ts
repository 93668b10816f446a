import { Logger, Module, type DynamicModule, type Provider } from '@nestjs/common';
import { MemoryLockBackend } from '../backends/memory.backend';
import { RedisLockModule } from '../module/redis-lock.module';
import { REDIS_LOCK_OPTIONS } from '../module/redis-lock.module-definition';
import type { RedisLockModuleOptions } from '../options/redis-lock-options';
import { lockServiceOn } from './lock-service-on';
import { LockService } from '../service/lock.service';
import { NestMetadata } from '../nest-internals';

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
 * `RedisLockModule` for tests, with no Redis: the same `LockService` class, `@Locked` binding and
 * interceptor, running on one in-memory backend per `forRoot()` call. Same semantics in one
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
@Module({})
export class RedisLockTestingModule {
  static forRoot(options: RedisLockTestingOptions = {}): DynamicModule {
    const { isGlobal = true, ...lockOptions } = options;
    const serviceOptions: RedisLockModuleOptions = {
      shutdownGrace: 0,
      ...lockOptions,
      startupCheck: 'off',
    };
    const lockService: Provider = {
      provide: LockService,
      useFactory: () => {
        warnInProduction();
        const backend = new MemoryLockBackend({ fenceRetention: lockOptions.fenceRetention });
        return lockServiceOn({ backend }, serviceOptions);
      },
    };
    return {
      module: RedisLockTestingModule,
      global: isGlobal,
      imports: metadataOf<NonNullable<DynamicModule['imports']>>(NestMetadata.moduleImports),
      // RedisLockModule's own providers, its LockService swapped for the in-memory one: whatever
      // binds `@Locked` methods in the real module binds them here too.
      providers: [
        { provide: REDIS_LOCK_OPTIONS, useValue: serviceOptions },
        lockService,
        ...metadataOf<Provider[]>(NestMetadata.moduleProviders).filter(
          (provider) => !providesLockService(provider),
        ),
      ],
      exports: metadataOf<NonNullable<DynamicModule['exports']>>(NestMetadata.moduleExports),
    };
  }
}

/** One list of `RedisLockModule`'s `@Module()` metadata (empty when absent). */
function metadataOf<T extends unknown[]>(key: string): T {
  return ((Reflect.getMetadata(key, RedisLockModule) as T | undefined) ?? []).slice() as T;
}

function providesLockService(provider: Provider): boolean {
  return (
    provider === LockService || (typeof provider === 'object' && provider.provide === LockService)
  );
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
