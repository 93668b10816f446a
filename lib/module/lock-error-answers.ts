import { Inject, Injectable, Optional } from '@nestjs/common';
import { ApplicationConfig, DiscoveryService, HttpAdapterHost } from '@nestjs/core';
import type { RedisLockModuleOptions } from '../options/redis-lock-options';
import { LockService } from '../service/lock.service';
import { LockExceptionFilter } from '../transports/lock-exception.filter';
import { addFirstGlobalFilter, NestMetadata } from '../nest-internals';
import { REDIS_LOCK_OPTIONS } from './redis-lock.module-definition';

/** Marks the filter this module put in place, so a later app built from the same classes replaces it. */
const DEFAULT_ANSWER = Symbol.for('nestjs-redis-lock:default-answer');

/**
 * Makes lock failures that reach Nest's default exception handling answer as `@Locked` handlers
 * do (`answerLockErrors`), with `LockExceptionFilter` as the filter Nest consults last:
 *
 * - first of the app's global filters (HTTP, microservices, GraphQL). Nest tries global filters
 *   from the last added to the first, after the method's and the class's, so every filter of the
 *   user's — `APP_FILTER` providers, whichever module declares them, and `app.useGlobalFilters()`,
 *   which come later — is tried before it;
 * - first of each gateway's class filters, since Nest applies no global filter to gateways.
 *
 * Done while Nest creates the instances, before it registers routes, handlers and gateways and
 * reads their filter lists (once, then).
 */
@Injectable()
export class LockErrorAnswers {
  constructor(
    config: ApplicationConfig,
    adapterHost: HttpAdapterHost,
    discovery: DiscoveryService,
    @Inject(REDIS_LOCK_OPTIONS) options: RedisLockModuleOptions,
    @Optional() locks?: LockService,
  ) {
    if (options?.answerLockErrors === false) return;
    const filter = Object.assign(new LockExceptionFilter(adapterHost, locks), {
      [DEFAULT_ANSWER]: true,
    });
    // With several RedisLockModules in one app, the first one's filter answers.
    addFirstGlobalFilter(config, filter, isDefaultAnswer);
    for (const wrapper of discovery.getProviders()) {
      const gateway = wrapper.metatype;
      if (typeof gateway !== 'function' || !Reflect.hasMetadata(NestMetadata.gateway, gateway))
        continue;
      const own = (Reflect.getOwnMetadata(NestMetadata.exceptionFilters, gateway) ??
        []) as unknown[];
      const userFilters = own.filter((entry) => !isDefaultAnswer(entry));
      Reflect.defineMetadata(NestMetadata.exceptionFilters, [filter, ...userFilters], gateway);
    }
  }
}

function isDefaultAnswer(filter: unknown): boolean {
  return typeof filter === 'object' && filter !== null && DEFAULT_ANSWER in filter;
}
