import { Body, Controller, Get, HttpCode, Param, Post, Put } from '@nestjs/common';
import { Locked } from 'nestjs-redis-lock';
import { InvalidRequestException } from '../shop.errors';
import { CreditStore } from './credit.store';
import { TransferService, type TransferResult } from './transfer.service';

const ID = /^[\w.-]{1,64}$/;

/** What `POST /transfers` takes. */
export interface TransferBody {
  from?: unknown;
  to?: unknown;
  amount?: unknown;
}

/**
 * `PUT  /credits/:userId`  { "credit": 100 }                        → 200 (sets it: admin/test)
 * `GET  /credits/:userId`                                           → 200 { userId, credit }
 * `POST /transfers`        { "from": "ann", "to": "bob", "amount": 5 } → 200 both balances | 409
 *
 * No lock here: the `LOCKS=off` variant. `LockedTransfersController` locks the route.
 */
@Controller()
export class TransfersController {
  constructor(
    protected readonly transfers: TransferService,
    protected readonly credits: CreditStore,
  ) {}

  @Put('credits/:userId')
  async setCredit(@Param('userId') userId: string, @Body() body: { credit?: unknown }) {
    const credit = body?.credit;
    if (typeof credit !== 'number' || !Number.isInteger(credit) || credit < 0) {
      throw new InvalidRequestException('Body must be { "credit": <integer >= 0> }.');
    }
    await this.credits.set(checkId('userId', userId), credit);
    return { userId, credit };
  }

  @Get('credits/:userId')
  async credit(@Param('userId') userId: string) {
    const [credit] = await this.credits.balances(checkId('userId', userId));
    return { userId, credit };
  }

  @Post('transfers')
  @HttpCode(200)
  transfer(@Body() body: TransferBody): Promise<TransferResult> {
    const amount = body?.amount;
    if (typeof amount !== 'number' || !Number.isInteger(amount) || amount <= 0) {
      throw new InvalidRequestException('amount must be an integer > 0.');
    }
    return this.transfers.transfer(checkId('from', body.from), checkId('to', body.to), amount);
  }
}

/**
 * The multi-key `@Locked` example: a transfer holds both users' wallets — all or none, in one
 * global order, so `ann → bob` and `bob → ann` at once on different replicas never deadlock —
 * for the whole read-then-write. While another transfer holds either wallet it waits (up to 5 s),
 * then answers 409 with `Retry-After`.
 */
@Controller()
export class LockedTransfersController extends TransfersController {
  @Post('transfers')
  @HttpCode(200)
  @Locked(['wallet:<body.from>', 'wallet:<body.to>'], { wait: 5_000 })
  override transfer(@Body() body: TransferBody): Promise<TransferResult> {
    return super.transfer(body);
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
