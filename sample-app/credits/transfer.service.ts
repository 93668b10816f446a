import { setTimeout as sleep } from 'node:timers/promises';
import { Inject, Injectable } from '@nestjs/common';
import { SHOP_SETTINGS, type ShopSettings } from '../settings';
import { InsufficientCreditException, InvalidRequestException } from '../shop.errors';
import { CreditStore } from './credit.store';

/** One transfer as answered by `POST /transfers`: both balances after it. */
export interface TransferResult {
  from: string;
  to: string;
  amount: number;
  balances: Record<string, number>;
}

/**
 * Moves credit from one user to another, naively: reads both balances, waits `ORDER_DELAY_MS`
 * (a fraud check), then writes both. Two transfers touching a shared user at once overwrite each
 * other's write, and credit appears or vanishes. No lock here: the caller (the `@Locked` route)
 * holds both users' wallets for the whole read-then-write.
 */
@Injectable()
export class TransferService {
  constructor(
    private readonly credits: CreditStore,
    @Inject(SHOP_SETTINGS) private readonly settings: ShopSettings,
  ) {}

  async transfer(from: string, to: string, amount: number): Promise<TransferResult> {
    if (from === to) throw new InvalidRequestException('from and to must be different users.');
    const [fromCredit = 0, toCredit = 0] = await this.credits.balances(from, to);
    if (fromCredit < amount) throw new InsufficientCreditException(from, fromCredit, amount);
    await sleep(this.settings.orderDelayMs);
    await this.credits.write(from, fromCredit - amount, to, toCredit + amount);
    return {
      from,
      to,
      amount,
      balances: { [from]: fromCredit - amount, [to]: toCredit + amount },
    };
  }
}
