import { Injectable } from '@nestjs/common';
import { Cron, CronExpression } from '@nestjs/schedule';
import { Locked } from 'nestjs-redis-lock';
import { SettlementService, type SettlementRun } from './settlement.service';

/**
 * The settlement job, run by one replica at a time. Every replica's cron fires each second; the
 * one that gets the `settlement` lock books, the others skip the tick (`onBusy: 'skip'` resolves
 * `undefined` instead of throwing — the ShedLock pattern). `minHold` keeps the lock for 300 ms
 * even when there is nothing to book: the replicas' timers fire a few ms apart, and a tick that
 * ended at once would otherwise be free again for the next replica's.
 *
 * `POST /settlements` holds the same lock (a `@Locked` route) and calls this method: the lock is
 * re-entrant within one call chain, so the route's lock is re-used here instead of skipping.
 */
@Injectable()
export class LockedSettlementService extends SettlementService {
  @Cron(CronExpression.EVERY_SECOND, { name: 'settlement' })
  @Locked('settlement', { onBusy: 'skip', minHold: 300 })
  override settle(): Promise<SettlementRun | undefined> {
    return super.settle();
  }
}
