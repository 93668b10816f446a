import { Injectable } from '@nestjs/common';
import { ShopRedisStore } from '../shop-redis-store';
import type { Order, VoucherView } from './voucher.model';

/**
 * The order write, fenced. The stock value is computed by the caller from an earlier read: that
 * is the naive part, kept on purpose. With a fence (the stock lock's token) the write is refused
 * when a later holder already wrote, so a holder that paused past its lease cannot overwrite it.
 *
 * KEYS[1] voucher hash, KEYS[2] buyers hash (userId → orderId), KEYS[3] orders list
 * ARGV[1] stock left, ARGV[2] userId, ARGV[3] orderId, ARGV[4] order JSON, ARGV[5] fence or ''
 */
const WRITE_ORDER = `
if ARGV[5] ~= '' then
  -- fenced write: refuse a holder older than the last one that wrote
  local last = tonumber(redis.call('HGET', KEYS[1], 'fence') or '0')
  if tonumber(ARGV[5]) < last then return 0 end
  redis.call('HSET', KEYS[1], 'fence', ARGV[5])
end
-- the naive write: a stock value the caller computed from its own, possibly stale, read
redis.call('HSET', KEYS[1], 'stock', ARGV[1])
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
redis.call('RPUSH', KEYS[3], ARGV[4])
return 1
`;

/**
 * Vouchers, orders and settlement state in Redis, shared by every replica. Each method is one
 * plain read or one write; the check-then-act sequences live in the services, where the locks are.
 *
 * Keys (P = SHOP_PREFIX): `P vouchers` (set of ids), `P voucher:<id>` (hash: stock, initialStock,
 * settled, settledUpTo, fence), `P voucher:<id>:buyers` (hash), `P voucher:<id>:orders` (list),
 * `P settlement:runs` (list, newest first).
 */
@Injectable()
export class VoucherStore extends ShopRedisStore {
  /** Creates the voucher, or resets it (stock, orders, settlement) if it exists. Test/admin use. */
  async reset(voucherId: string, stock: number): Promise<void> {
    const keys = this.keys(voucherId);
    await this.redis
      .multi()
      .del(keys.orders, keys.buyers)
      .hset(keys.voucher, { stock, initialStock: stock, settled: 0, settledUpTo: 0 })
      .sadd(this.key('vouchers'), voucherId)
      .exec();
  }

  /** Creates the voucher unless it exists (safe when every replica seeds at startup). */
  async createIfMissing(voucherId: string, stock: number): Promise<boolean> {
    const keys = this.keys(voucherId);
    const created = await this.redis.hsetnx(keys.voucher, 'initialStock', stock);
    if (created === 1) {
      await this.redis
        .multi()
        .hset(keys.voucher, { stock, settled: 0, settledUpTo: 0 })
        .sadd(this.key('vouchers'), voucherId)
        .exec();
    }
    return created === 1;
  }

  async exists(voucherId: string): Promise<boolean> {
    return (await this.redis.exists(this.keys(voucherId).voucher)) === 1;
  }

  async readStock(voucherId: string): Promise<number> {
    return Number((await this.redis.hget(this.keys(voucherId).voucher, 'stock')) ?? 0);
  }

  async hasOrdered(voucherId: string, userId: string): Promise<boolean> {
    return (await this.redis.hexists(this.keys(voucherId).buyers, userId)) === 1;
  }

  /** Writes the order and the new stock; false when `fence` is older than the last write's. */
  async writeOrder(order: Order, stockLeft: number, fence?: number): Promise<boolean> {
    const keys = this.keys(order.voucherId);
    const written = await this.redis.eval(
      WRITE_ORDER,
      3,
      keys.voucher,
      keys.buyers,
      keys.orders,
      stockLeft,
      order.userId,
      order.orderId,
      JSON.stringify(order),
      fence === undefined ? '' : String(fence),
    );
    return written === 1;
  }

  async view(voucherId: string): Promise<VoucherView | null> {
    const keys = this.keys(voucherId);
    const [hash, orders] = await Promise.all([
      this.redis.hgetall(keys.voucher),
      this.redis.lrange(keys.orders, 0, -1),
    ]);
    if (hash.initialStock === undefined) return null;
    return {
      voucherId,
      initialStock: Number(hash.initialStock),
      stock: Number(hash.stock),
      settled: Number(hash.settled ?? 0),
      orders: orders.map((json) => JSON.parse(json) as Order),
    };
  }

  voucherIds(): Promise<string[]> {
    return this.redis.smembers(this.key('vouchers'));
  }

  /** How many orders of the voucher the settlement has booked (its cursor in the orders list). */
  async settledUpTo(voucherId: string): Promise<number> {
    return Number((await this.redis.hget(this.keys(voucherId).voucher, 'settledUpTo')) ?? 0);
  }

  /** Orders from position `from` on. */
  async ordersFrom(voucherId: string, from: number): Promise<Order[]> {
    const orders = await this.redis.lrange(this.keys(voucherId).orders, from, -1);
    return orders.map((json) => JSON.parse(json) as Order);
  }

  /** Books `count` orders: moves the cursor to `upTo` and adds `count` to the settled units. */
  async bookSettlement(voucherId: string, upTo: number, count: number): Promise<void> {
    const key = this.keys(voucherId).voucher;
    await this.redis.multi().hset(key, 'settledUpTo', upTo).hincrby(key, 'settled', count).exec();
  }

  async recordRun(run: object): Promise<void> {
    const key = this.key('settlement:runs');
    await this.redis.multi().lpush(key, JSON.stringify(run)).ltrim(key, 0, 49).exec();
  }

  async recentRuns(): Promise<unknown[]> {
    const runs = await this.redis.lrange(this.key('settlement:runs'), 0, -1);
    return runs.map((json) => JSON.parse(json) as unknown);
  }

  private keys(voucherId: string) {
    const voucher = this.key(`voucher:${voucherId}`);
    return { voucher, buyers: `${voucher}:buyers`, orders: `${voucher}:orders` };
  }
}
