import { Inject, Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import Redis from 'ioredis';
import { SHOP_SETTINGS, type ShopSettings } from '../settings';

/**
 * Users' shop credit in Redis, shared by every replica: `P credit:<userId>` (an integer). Each
 * method is one plain read or one write; the read-then-write of a transfer lives in the service,
 * where the lock is.
 */
@Injectable()
export class CreditStore implements OnApplicationShutdown {
  private readonly logger = new Logger(CreditStore.name);
  private readonly redis: Redis;
  private readonly prefix: string;

  constructor(@Inject(SHOP_SETTINGS) settings: ShopSettings) {
    this.prefix = settings.prefix;
    this.redis = new Redis(settings.redisUrl, { maxRetriesPerRequest: 2 });
    this.redis.on('error', (error: Error) => this.logger.warn(`Redis: ${error.message}`));
  }

  async balances(...userIds: string[]): Promise<number[]> {
    const values = await this.redis.mget(userIds.map((userId) => this.key(userId)));
    return values.map((value) => Number(value ?? 0));
  }

  /** Sets a user's credit: an admin/test endpoint's write. */
  async set(userId: string, credit: number): Promise<void> {
    await this.redis.set(this.key(userId), credit);
  }

  /** Writes both balances of a transfer, as the caller computed them from its own read. */
  async write(from: string, fromCredit: number, to: string, toCredit: number): Promise<void> {
    await this.redis.mset(this.key(from), fromCredit, this.key(to), toCredit);
  }

  async onApplicationShutdown(): Promise<void> {
    await this.redis.quit().catch(() => this.redis.disconnect());
  }

  private key(userId: string): string {
    return `${this.prefix}credit:${userId}`;
  }
}
