import { ConfigurableModuleBuilder } from '@nestjs/common';
import type { RedisLockModuleOptions } from '../options/redis-lock-options';

/**
 * `forRoot` / `forRootAsync` (useFactory, useClass, useExisting, imports, inject) come from
 * Nest's builder, as in @nestjs/cache-manager. `isGlobal` defaults to true: a lock service is
 * app-wide infrastructure, and `@Locked` routes in any module need it.
 */
export const {
  ConfigurableModuleClass,
  MODULE_OPTIONS_TOKEN: REDIS_LOCK_OPTIONS,
  OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<RedisLockModuleOptions>({ moduleName: 'RedisLock' })
  .setClassMethodName('forRoot')
  .setExtras({ isGlobal: true }, (definition, extras) => ({
    ...definition,
    global: extras.isGlobal,
  }))
  .build();
