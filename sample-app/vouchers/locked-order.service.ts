import { Inject, Injectable } from '@nestjs/common';
import { Locked, LockService } from 'nestjs-redis-lock';
import { SHOP_SETTINGS, type ShopSettings } from '../settings';
import { OrderService } from './order.service';
import type { Order } from './voucher.model';
import { VoucherStore } from './voucher.store';

/**
 * `OrderService` made correct by two locks — this file is the entire fix:
 *
 * 1. `@Locked('order:<userId>')` makes "has this user ordered? → write the order" one step per
 *    user, on every replica. `wait` is 0 (the default): a second click of the same user while the
 *    first is in flight fails fast with 409 `busy`; once the first order is written, later clicks
 *    get 409 `already-ordered`.
 * 2. The user lock does not protect stock: two *different* users still read the same stock. So
 *    the stock read-then-write runs under a second lock, `stock:<voucherId>`, taken by hand with
 *    `withLock` and a wait budget: orders of different users queue for a few milliseconds instead
 *    of failing. Its fence goes to the write, which Redis refuses if a later holder already wrote.
 *
 * Locks are always taken user first, then stock, so two orders can never wait on each other.
 * (An atomic Lua "decrement if positive" would protect stock without queueing; the lock keeps the
 * naive read-then-write readable, and shows `withLock` and fencing.)
 */
@Injectable()
export class LockedOrderService extends OrderService {
  constructor(
    store: VoucherStore,
    @Inject(SHOP_SETTINGS) settings: ShopSettings,
    private readonly locks: LockService,
  ) {
    super(store, settings);
  }

  @Locked('order:<userId>')
  override placeOrder(userId: string, voucherId: string): Promise<Order> {
    return super.placeOrder(userId, voucherId);
  }

  protected override withStock<T>(
    voucherId: string,
    work: (fence: number | undefined) => Promise<T>,
  ): Promise<T> {
    return this.locks.withLock(`stock:${voucherId}`, (lock) => work(lock.fence), {
      wait: this.settings.stockWaitMs,
    });
  }
}
