import { Module, type DynamicModule } from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import { ScheduleModule } from '@nestjs/schedule';
import { TerminusModule } from '@nestjs/terminus';
import { LockExceptionFilter, RedisLockModule } from 'nestjs-redis-lock';
import { LockHealthIndicator } from 'nestjs-redis-lock/health';
import { lockExceptionFactory } from './lock-errors';
import { HealthController } from './observability/health.controller';
import { LockStats, LockStatsController } from './observability/lock-stats';
import { MetricsController } from './observability/metrics.controller';
import { SHOP_METRICS, type ShopMetrics } from './observability/shop-metrics';
import { SHOP_SETTINGS, type ShopSettings } from './settings';
import { LockedSettlementService } from './settlement/locked-settlement.service';
import {
  LockedSettlementController,
  SettlementController,
} from './settlement/settlement.controller';
import { SettlementService } from './settlement/settlement.service';
import { CreditStore } from './credits/credit.store';
import { TransferService } from './credits/transfer.service';
import { LockedTransfersController, TransfersController } from './credits/transfers.controller';
import { VoucherSeeder } from './voucher-seeder';
import { LockedOrderService } from './vouchers/locked-order.service';
import { OrderService } from './vouchers/order.service';
import { VoucherStore } from './vouchers/voucher.store';
import { VouchersController } from './vouchers/vouchers.controller';

/**
 * The voucher shop. `settings.locks` picks the locked classes (and imports `RedisLockModule`) or
 * their lock-free bases: `LOCKS=off` does not merely skip a check, the locking code is not there —
 * which is what makes the control run of the demo and the e2e test honest. `metrics`, started
 * before bootstrap (main.ts), adds `GET /metrics`; without it the route is not there.
 */
@Module({})
export class AppModule {
  static forRoot(settings: ShopSettings, metrics?: ShopMetrics): DynamicModule {
    const locked = settings.locks;
    return {
      module: AppModule,
      imports: [
        ScheduleModule.forRoot(),
        TerminusModule,
        ...(locked
          ? [
              RedisLockModule.forRoot({
                redis: settings.redisUrl,
                prefix: `${settings.prefix}lock:`,
                exceptionFactory: lockExceptionFactory,
              }),
            ]
          : []),
      ],
      controllers: [
        VouchersController,
        locked ? LockedSettlementController : SettlementController,
        locked ? LockedTransfersController : TransfersController,
        HealthController,
        ...(locked ? [LockStatsController] : []),
        ...(metrics ? [MetricsController] : []),
      ],
      providers: [
        { provide: SHOP_SETTINGS, useValue: settings },
        VoucherStore,
        VoucherSeeder,
        CreditStore,
        TransferService,
        { provide: OrderService, useClass: locked ? LockedOrderService : OrderService },
        {
          provide: SettlementService,
          useClass: locked ? LockedSettlementService : SettlementService,
        },
        { provide: APP_FILTER, useClass: LockExceptionFilter },
        ...(locked ? [LockHealthIndicator, LockStats] : []),
        ...(metrics ? [{ provide: SHOP_METRICS, useValue: metrics }] : []),
      ],
    };
  }
}
