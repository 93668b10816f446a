import { setTimeout as sleep } from 'node:timers/promises';
import { Inject, Injectable, Logger } from '@nestjs/common';
import { Cron, CronExpression } from '@nestjs/schedule';
import { SHOP_SETTINGS, type ShopSettings } from '../settings';
import { VoucherStore } from '../vouchers/voucher.store';

/** One settlement pass, as recorded in `GET /settlements`. */
export interface SettlementRun {
  replica: string;
  startedAt: string;
  /** Orders booked by this pass, per voucher. */
  booked: Record<string, number>;
}

/**
 * Books new orders every second (think: pays the merchant), naively: reads how far it got, waits
 * `ORDER_DELAY_MS`, then adds what it found. Two passes at once would book the same orders twice,
 * and every replica runs this cron job — so it must run on one replica at a time.
 *
 * No lock here: this is the `LOCKS=off` variant. `LockedSettlementService` adds the lock.
 */
@Injectable()
export class SettlementService {
  protected readonly logger = new Logger('Settlement');

  constructor(
    protected readonly store: VoucherStore,
    @Inject(SHOP_SETTINGS) protected readonly settings: ShopSettings,
  ) {}

  /** One pass; called by the cron job every second and by `POST /settlements`. */
  @Cron(CronExpression.EVERY_SECOND, { name: 'settlement' })
  settle(): Promise<SettlementRun | undefined> {
    return this.bookNewOrders();
  }

  recentRuns(): Promise<unknown[]> {
    return this.store.recentRuns();
  }

  protected async bookNewOrders(): Promise<SettlementRun> {
    const run: SettlementRun = {
      replica: this.settings.replica,
      startedAt: new Date().toISOString(),
      booked: {},
    };
    for (const voucherId of await this.store.voucherIds()) {
      const from = await this.store.settledUpTo(voucherId);
      const fresh = await this.store.ordersFrom(voucherId, from);
      if (fresh.length === 0) continue;
      await sleep(this.settings.orderDelayMs);
      await this.store.bookSettlement(voucherId, from + fresh.length, fresh.length);
      run.booked[voucherId] = fresh.length;
    }
    if (Object.keys(run.booked).length > 0) {
      await this.store.recordRun(run);
      this.logger.log(`Booked ${JSON.stringify(run.booked)}`);
    }
    return run;
  }
}
