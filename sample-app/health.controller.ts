import { Controller, Get, Inject } from '@nestjs/common';
import { SHOP_SETTINGS, type ShopSettings } from './settings';

@Controller('health')
export class HealthController {
  constructor(@Inject(SHOP_SETTINGS) private readonly settings: ShopSettings) {}

  @Get()
  health(): { status: 'ok'; replica: string; locks: 'on' | 'off' } {
    return {
      status: 'ok',
      replica: this.settings.replica,
      locks: this.settings.locks ? 'on' : 'off',
    };
  }
}
