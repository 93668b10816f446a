// The code of docs/semaphores.md's fair-order example, as an app would have it (its module
// imports `RedisLockModule.forRoot({ …, fair: true })`).
import { Injectable } from '@nestjs/common';
import { LockService } from 'nestjs-redis-lock';

export abstract class PartnerApi {
  abstract quote(orderId: string): Promise<number>;
}

@Injectable()
export class QuoteService {
  constructor(
    private readonly locks: LockService,
    private readonly partner: PartnerApi,
  ) {}

  /**
   * At most 2 calls to the partner at once, across every replica. The others wait for a permit
   * in the order they asked, up to 10 s each.
   */
  quote(orderId: string): Promise<number> {
    return this.locks.withLock('partner:quotes', () => this.partner.quote(orderId), {
      permits: 2,
      wait: 10_000,
    });
  }
}
