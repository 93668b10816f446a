// The code of docs/multi-key.md, as a reader would copy it (kept in step with the page).
import { Body, Controller, Injectable, Post } from '@nestjs/common';
import { currentLock, Locked, LockService, type MultiLockHandle } from 'nestjs-redis-lock';

/** Balances in any store; `fence` lets the store refuse a stale holder's write (see the page). */
export abstract class Ledger {
  abstract balance(account: string): Promise<number>;
  abstract write(account: string, balance: number, fence: number): Promise<void>;
}

@Injectable()
export class Transfers {
  constructor(
    private readonly locks: LockService,
    private readonly ledger: Ledger,
  ) {}

  /** Holds both accounts (all or none, never a deadlock) for the read-then-write. */
  async move(from: string, to: string, amount: number): Promise<void> {
    // One account: both keys collapse into one lock, and writing `a - amount` then `b + amount`
    // (both read as the same balance) would create money.
    if (from === to) return;
    return this.locks.withLock(
      [`account:${from}`, `account:${to}`],
      async (lock) => {
        const [a, b] = [await this.ledger.balance(from), await this.ledger.balance(to)];
        lock.signal.throwIfAborted(); // one key lost: stop before writing
        await this.ledger.write(from, a - amount, lock.fences[`account:${from}`]!);
        await this.ledger.write(to, b + amount, lock.fences[`account:${to}`]!);
      },
      { wait: 2_000 },
    );
  }
}

@Controller('transfers')
export class TransfersController {
  constructor(private readonly transfers: Transfers) {}

  /** 409 + Retry-After while another request holds either account past `wait`. */
  @Post()
  @Locked(['account:<body.from>', 'account:<body.to>'], { wait: 2_000 })
  async create(@Body() body: { from: string; to: string; amount: number }): Promise<void> {
    // Re-entrant: `move` joins the route's lock on both accounts instead of waiting for itself.
    await this.transfers.move(body.from, body.to, body.amount);
  }
}

@Injectable()
export class Merges {
  constructor(private readonly ledger: Ledger) {}

  /** Moves every balance of `accounts` into `into`, holding all of them: a list no template names. */
  @Locked(
    (into: string, accounts: readonly string[]) => [into, ...accounts].map((id) => `account:${id}`),
    { wait: 2_000 },
  )
  async merge(into: string, accounts: readonly string[]): Promise<void> {
    const lock = currentLock() as MultiLockHandle;
    // Named twice, an account is one key and must be emptied once.
    const others = [...new Set(accounts)].filter((id) => id !== into);
    let total = await this.ledger.balance(into);
    for (const id of others) total += await this.ledger.balance(id);
    lock.signal.throwIfAborted();
    for (const id of others) await this.ledger.write(id, 0, lock.fences[`account:${id}`]!);
    await this.ledger.write(into, total, lock.fences[`account:${into}`]!);
  }
}
