import { Module, type DynamicModule } from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import { ScheduleModule } from '@nestjs/schedule';
import { LockExceptionFilter, RedisLockModule } from 'nestjs-redis-lock';
import { HealthController } from './health.controller';
import { lockExceptionFactory } from './lock-errors';
import { SHOP_SETTINGS, type ShopSettings } from './settings';
import { LockedSettlementService } from './settlement/locked-settlement.service';
import {
  LockedSettlementController,
  SettlementController,
} from './settlement/settlement.controller';
import { SettlementService } from './settlement/settlement.service';
import { VoucherSeeder } from './voucher-seeder';
import { LockedOrderService } from './vouchers/locked-order.service';
import { OrderService } from './vouchers/order.service';
import { VoucherStore } from './vouchers/voucher.store';
import { VouchersController } from './vouchers/vouchers.controller';

/**
 * The voucher shop. `settings.locks` picks the locked classes (and imports `RedisLockModule`) or
 * their lock-free bases: `LOCKS=off` does not merely skip a check, the locking code is not there —
 * which is what makes the control run of the demo and the e2e test honest.
 */
@Module({})
export class AppModule {
  static forRoot(settings: ShopSettings): DynamicModule {
    const locked = settings.locks;
    return {
      module: AppModule,
      imports: [
        ScheduleModule.forRoot(),
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
        HealthController,
      ],
      providers: [
        { provide: SHOP_SETTINGS, useValue: settings },
        VoucherStore,
        VoucherSeeder,
        { provide: OrderService, useClass: locked ? LockedOrderService : OrderService },
        {
          provide: SettlementService,
          useClass: locked ? LockedSettlementService : SettlementService,
        },
        { provide: APP_FILTER, useClass: LockExceptionFilter },
      ],
    };
  }
}
