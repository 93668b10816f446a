import { Body, Controller, Get, Param, Post, Put } from '@nestjs/common';
import { InvalidRequestException, UnknownVoucherException } from '../shop.errors';
import { OrderService } from './order.service';
import type { Order, VoucherView } from './voucher.model';
import { VoucherStore } from './voucher.store';

const ID = /^[\w.-]{1,64}$/;

/**
 * `PUT  /vouchers/:voucherId`         { "stock": 10 }      → 200 voucher (creates or resets it)
 * `GET  /vouchers/:voucherId`                              → 200 { stock, orders, … }
 * `POST /vouchers/:voucherId/orders`  { "userId": "u1" }   → 201 order | 409 | 410
 */
@Controller('vouchers')
export class VouchersController {
  constructor(
    private readonly orders: OrderService,
    private readonly store: VoucherStore,
  ) {}

  /** Creates or resets a voucher: an admin/test endpoint, not meant to run during a sale. */
  @Put(':voucherId')
  async reset(
    @Param('voucherId') voucherId: string,
    @Body() body: { stock?: unknown } | undefined,
  ): Promise<VoucherView> {
    const stock = body?.stock;
    if (typeof stock !== 'number' || !Number.isInteger(stock) || stock < 0) {
      throw new InvalidRequestException('Body must be { "stock": <integer >= 0> }.');
    }
    await this.store.reset(checkId('voucherId', voucherId), stock);
    return (await this.store.view(voucherId))!;
  }

  @Get(':voucherId')
  async view(@Param('voucherId') voucherId: string): Promise<VoucherView> {
    const view = await this.store.view(checkId('voucherId', voucherId));
    if (!view) throw new UnknownVoucherException(voucherId);
    return view;
  }

  @Post(':voucherId/orders')
  order(
    @Param('voucherId') voucherId: string,
    @Body() body: { userId?: unknown } | undefined,
  ): Promise<Order> {
    return this.orders.placeOrder(checkId('userId', body?.userId), checkId('voucherId', voucherId));
  }
}

function checkId(name: string, value: unknown): string {
  if (typeof value !== 'string' || !ID.test(value)) {
    throw new InvalidRequestException(
      `${name} must be 1-64 characters of letters, digits, "_", "-" or "."; got ${JSON.stringify(value) ?? 'nothing'}.`,
    );
  }
  return value;
}
