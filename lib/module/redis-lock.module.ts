import { Module, type NestModule } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { DirectRoutes } from '../decorator/direct-routes';
import { LOCK_SOURCE } from '../decorator/locked-binding';
import { LockedExplorer } from '../decorator/locked.explorer';
import { LockedInterceptor } from '../decorator/locked.interceptor';
import { WhenLeaderExplorer } from '../decorator/when-leader.explorer';
import { LockService } from '../service/lock.service';
import type { RedisLockModuleOptions } from '../options/redis-lock-options';
import type { LockStore } from '../engine/lock-engine';
import { LockErrorAnswers } from './lock-error-answers';
import { LOCK_STORE, lockStoreProvider, UnclaimedStoreCloser } from './lock-store';
import { ConfigurableModuleClass, REDIS_LOCK_OPTIONS } from './redis-lock.module-definition';
import { RedisLockStartupCheck } from './startup-check';

/**
 * Provides `LockService` on the lock store its options describe (provided under `LOCK_STORE`),
 * also to the `@Locked` methods of every provider and controller of the modules that see it (Nest
 * injects it into each instance, in any scope), checks `@Locked` keys and lock kinds at
 * bootstrap, provides the interceptor `@Locked` routes use where their lock needs the request
 * (and takes it off the others), and answers lock failures that reach Nest's default exception
 * handling as `@Locked` routes do (`answerLockErrors`). Global by default (`isGlobal: false` to
 * scope it: then each module's `@Locked` uses the one that module imports).
 *
 * @example
 * ```ts
 * @Module({ imports: [RedisLockModule.forRoot({ redis: process.env.REDIS_URL })] })
 * export class AppModule {}
 *
 * RedisLockModule.forRootAsync({
 *   inject: [ConfigService],
 *   useFactory: (config: ConfigService) => ({ redis: config.getOrThrow('REDIS_URL') }),
 * });
 * ```
 */
@Module({
  imports: [DiscoveryModule],
  providers: [
    // The store under a token of its own, so a test (or RedisLockTestingModule) swaps it alone.
    lockStoreProvider,
    {
      provide: LockService,
      useFactory: (options: RedisLockModuleOptions, store: LockStore) =>
        new LockService(options, store),
      inject: [REDIS_LOCK_OPTIONS, LOCK_STORE],
    },
    // What `@Locked` instances are injected with: an alias, so an overridden LockService (in
    // tests) flows through it, under a global symbol that another copy of the package shares.
    { provide: LOCK_SOURCE, useExisting: LockService },
    LockedExplorer,
    // Campaigns for the `leaders` option's roles and `@WhenLeader` methods' at bootstrap.
    WhenLeaderExplorer,
    LockedInterceptor,
    DirectRoutes,
    RedisLockStartupCheck,
    LockErrorAnswers,
    UnclaimedStoreCloser,
  ],
  exports: [LockService, LOCK_SOURCE, LOCK_STORE, LockedInterceptor],
})
export class RedisLockModule extends ConfigurableModuleClass implements NestModule {
  constructor(private readonly directRoutes: DirectRoutes) {
    super();
  }

  /**
   * Decides which `@Locked` routes Nest calls without `LockedInterceptor`. Here, not at a
   * provider's creation: Nest calls `configure()` after the app's global interceptors and filters
   * are set (`APP_*` providers, `app.useGlobal*()`), and before it registers the routes.
   */
  configure(): void {
    this.directRoutes.choose();
  }
}
