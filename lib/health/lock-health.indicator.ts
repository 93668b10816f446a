import { Injectable } from '@nestjs/common';
import { HealthIndicatorService, type HealthIndicatorResult } from '@nestjs/terminus';
import { LockService } from '../service/lock.service';
import { monotonicNow } from '../util/clock';
import { resolveHealthOptions, type LockHealthOptions } from './lock-health-options';
import { judgeLockHealth, type LockHealthDetails } from './lock-health-verdict';
import { pingConnections } from './ping-connections';

/**
 * A `@nestjs/terminus` health indicator for the locks of the injected `LockService`: Redis
 * reachable (PING latency), the renewal loop running and on time, the held lock count, recent
 * renewal failures. Down when the locks cannot be kept. Provide it beside `TerminusModule`.
 *
 * @example
 * ```ts
 * @Controller('health')
 * export class HealthController {
 *   constructor(
 *     private readonly health: HealthCheckService,
 *     private readonly locks: LockHealthIndicator,
 *   ) {}
 *
 *   @Get()
 *   @HealthCheck()
 *   check() {
 *     return this.health.check([() => this.locks.isHealthy('locks')]);
 *   }
 * }
 * ```
 */
@Injectable()
export class LockHealthIndicator {
  constructor(
    private readonly locks: LockService,
    private readonly indicator: HealthIndicatorService,
  ) {}

  /**
   * Checks the locks now, under `key`. Every Redis command is bounded by `commandTimeout`, so
   * the check answers within about that long even when Redis does not. Throws
   * `RedisLockConfigError` for a bad option.
   */
  async isHealthy<const Key extends string>(
    key: Key,
    options: LockHealthOptions = {},
  ): Promise<HealthIndicatorResult<Key, 'up' | 'down', LockHealthDetails>> {
    const { engine } = this.locks;
    const limits = resolveHealthOptions(options, engine.options.ttl);
    const ping = await pingConnections(engine.connections, engine.options.commandTimeout);
    const details = judgeLockHealth(ping, engine.health(), limits, monotonicNow());
    const check = this.indicator.check(key);
    return details.reasons ? check.down(details) : check.up(details);
  }
}
