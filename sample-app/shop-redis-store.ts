import { Inject, Logger, type OnApplicationShutdown } from '@nestjs/common';
import Redis from 'ioredis';
import { SHOP_SETTINGS, type ShopSettings } from './settings';

/**
 * What the shop's Redis stores share: a connection of their own to the Redis every replica keeps
 * its data in, its errors logged (a store call then fails on its own), key names under the shop's
 * prefix, and the connection closed at shutdown.
 */
export abstract class ShopRedisStore implements OnApplicationShutdown {
  protected readonly logger = new Logger(this.constructor.name);
  protected readonly redis: Redis;
  private readonly prefix: string;

  constructor(@Inject(SHOP_SETTINGS) settings: ShopSettings) {
    this.prefix = settings.prefix;
    this.redis = new Redis(settings.redisUrl, { maxRetriesPerRequest: 2 });
    this.redis.on('error', (error: Error) => this.logger.warn(`Redis: ${error.message}`));
  }

  async onApplicationShutdown(): Promise<void> {
    await this.redis.quit().catch(() => this.redis.disconnect());
    this.logger.log('Redis connection closed');
  }

  /** `name` under the shop's key prefix. */
  protected key(name: string): string {
    return `${this.prefix}${name}`;
  }
}
