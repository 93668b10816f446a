import { Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { LockedExplorer } from '../decorator/locked.explorer';
import { LockedInterceptor } from '../decorator/locked.interceptor';
import { LockService } from '../service/lock.service';
import type { RedisLockModuleOptions } from '../options/redis-lock-options';
import { ConfigurableModuleClass, REDIS_LOCK_OPTIONS } from './redis-lock.module-definition';
import { RedisLockStartupCheck } from './startup-check';

/**
 * Provides `LockService`, binds every `@Locked` provider method at bootstrap, and provides the
 * interceptor `@Locked` routes use. Global by default (`isGlobal: false` to scope it).
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
    {
      provide: LockService,
      useFactory: (options: RedisLockModuleOptions) => new LockService(options),
      inject: [REDIS_LOCK_OPTIONS],
    },
    LockedExplorer,
    LockedInterceptor,
    RedisLockStartupCheck,
  ],
  exports: [LockService, LockedInterceptor],
})
export class RedisLockModule extends ConfigurableModuleClass {}
