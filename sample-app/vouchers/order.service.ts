import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Inject, Injectable } from '@nestjs/common';
import { SHOP_SETTINGS, type ShopSettings } from '../settings';
import {
  AlreadyOrderedException,
  SoldOutException,
  StaleWriteException,
  UnknownVoucherException,
} from '../shop.errors';
import type { Order } from './voucher.model';
import { VoucherStore } from './voucher.store';

/**
 * Takes orders the naive way, on purpose: it reads "has this user ordered?" and "is there
 * stock?", waits `ORDER_DELAY_MS` (think: a payment or fraud check), then writes. Two requests
 * that overlap in that window both pass the checks — a duplicate order, or one unit sold twice.
 *
 * This class has no locks: it is what runs with `LOCKS=off`. `LockedOrderService` adds them,
 * and is the whole difference between the racy shop and the correct one.
 */
@Injectable()
export class OrderService {
  constructor(
    protected readonly store: VoucherStore,
    @Inject(SHOP_SETTINGS) protected readonly settings: ShopSettings,
  ) {}

  /** Places `userId`'s order for `voucherId`: one per user, never more than the stock. */
  async placeOrder(userId: string, voucherId: string): Promise<Order> {
    if (!(await this.store.exists(voucherId))) throw new UnknownVoucherException(voucherId);
    // Check 1, one order per user: only a lock on the user makes check + write one step.
    if (await this.store.hasOrdered(voucherId, userId)) {
      throw new AlreadyOrderedException(userId, voucherId);
    }
    return this.withStock(voucherId, async (fence) => {
      // Check 2, stock: shared by every user, so it needs a lock of its own (see withStock).
      const stock = await this.store.readStock(voucherId);
      if (stock <= 0) throw new SoldOutException(voucherId);
      await sleep(this.settings.orderDelayMs);
      const order: Order = {
        orderId: randomUUID(),
        voucherId,
        userId,
        replica: this.settings.replica,
        createdAt: new Date().toISOString(),
      };
      if (!(await this.store.writeOrder(order, stock - 1, fence))) {
        throw new StaleWriteException(voucherId);
      }
      return order;
    });
  }

  /** Runs the stock read-then-write. Unprotected here; `LockedOrderService` locks it. */
  protected withStock<T>(
    _voucherId: string,
    work: (fence: number | undefined) => Promise<T>,
  ): Promise<T> {
    return work(undefined);
  }
}
