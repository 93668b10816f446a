import { Controller, Get, Inject, Optional } from '@nestjs/common';
import { HealthCheck, HealthCheckService, HealthIndicatorService } from '@nestjs/terminus';
import { LockHealthIndicator } from 'nestjs-redis-lock/health';
import { SHOP_SETTINGS, type ShopSettings } from '../settings';

/**
 * `GET /health`, for readiness probes: 200 while this replica can keep its locks, 503 (terminus'
 * `status: "error"`) when it cannot — Redis out of reach, renewals failing, the event loop lagging.
 * `shop` says which replica answered; `locks` is there only with LOCKS=on (no LockService else).
 */
@Controller('health')
export class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly indicators: HealthIndicatorService,
    @Inject(SHOP_SETTINGS) private readonly settings: ShopSettings,
    @Optional() private readonly locks?: LockHealthIndicator,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    const { replica, locks } = this.settings;
    const lockHealth = this.locks;
    return this.health.check([
      () => this.indicators.check('shop').up({ replica, locks: locks ? 'on' : 'off' }),
      ...(lockHealth ? [() => lockHealth.isHealthy('locks')] : []),
    ]);
  }
}
