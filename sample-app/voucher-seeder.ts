import { Inject, Injectable, Logger, type OnApplicationBootstrap } from '@nestjs/common';
import { SHOP_SETTINGS, type ShopSettings } from './settings';
import { VoucherStore } from './vouchers/voucher.store';

/** Creates the `SEED_VOUCHERS` vouchers that do not exist yet (every replica may try; one wins). */
@Injectable()
export class VoucherSeeder implements OnApplicationBootstrap {
  private readonly logger = new Logger(VoucherSeeder.name);

  constructor(
    private readonly store: VoucherStore,
    @Inject(SHOP_SETTINGS) private readonly settings: ShopSettings,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    for (const { voucherId, stock } of this.settings.seedVouchers) {
      if (await this.store.createIfMissing(voucherId, stock)) {
        this.logger.log(`Created voucher "${voucherId}" with stock ${stock}`);
      }
    }
  }
}
