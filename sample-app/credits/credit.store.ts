import { Injectable } from '@nestjs/common';
import { ShopRedisStore } from '../shop-redis-store';

/**
 * Users' shop credit in Redis, shared by every replica: `P credit:<userId>` (an integer). Each
 * method is one plain read or one write; the read-then-write of a transfer lives in the service,
 * where the lock is.
 */
@Injectable()
export class CreditStore extends ShopRedisStore {
  async balances(...userIds: string[]): Promise<number[]> {
    const values = await this.redis.mget(userIds.map((userId) => this.creditKey(userId)));
    return values.map((value) => Number(value ?? 0));
  }

  /** Sets a user's credit: an admin/test endpoint's write. */
  async set(userId: string, credit: number): Promise<void> {
    await this.redis.set(this.creditKey(userId), credit);
  }

  /** Writes both balances of a transfer, as the caller computed them from its own read. */
  async write(from: string, fromCredit: number, to: string, toCredit: number): Promise<void> {
    await this.redis.mset(this.creditKey(from), fromCredit, this.creditKey(to), toCredit);
  }

  private creditKey(userId: string): string {
    return this.key(`credit:${userId}`);
  }
}
