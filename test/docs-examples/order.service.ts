// The service of docs/testing.md's examples, as an app would have it.
import { Injectable } from '@nestjs/common';
import { Locked } from 'nestjs-redis-lock';

export abstract class PaymentGateway {
  abstract charge(orderId: string): Promise<string>;
}

@Injectable()
export class OrderService {
  constructor(private readonly payments: PaymentGateway) {}

  /** One payment per order at a time, across every replica. */
  @Locked('order:<orderId>')
  async pay(orderId: string): Promise<string> {
    return this.payments.charge(orderId);
  }
}
