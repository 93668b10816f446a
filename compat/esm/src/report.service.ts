import { Injectable } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { currentLock, Locked, LockService } from 'nestjs-redis-lock';
import { HOLD_MS } from './config.js';

export interface Report {
  tenantId: string;
  fence: number;
}

/**
 * What an application provider looks like: `@Locked` methods keyed by an argument, and
 * `LockService` injected by its class — the class imported here must be the DI token the module
 * registered, or Nest cannot resolve the constructor.
 */
@Injectable()
export class ReportService {
  /** How many `build` calls run at this moment, and the most that ever ran at once. */
  active = 0;
  maxActive = 0;

  constructor(readonly locks: LockService) {}

  @Locked('report:<tenantId>')
  async build(tenantId: string): Promise<Report> {
    this.active++;
    this.maxActive = Math.max(this.maxActive, this.active);
    try {
      await sleep(HOLD_MS);
      return { tenantId, fence: currentLock()!.fence };
    } finally {
      this.active--;
    }
  }

  /** A cron-style job: when another replica holds the lock, return `undefined` without running. */
  @Locked('report:<tenantId>', { onBusy: 'skip' })
  async buildIfIdle(tenantId: string): Promise<Report> {
    return this.build(tenantId);
  }

  /** `withLock` around a `@Locked` call on the same key: the inner call re-enters the hold. */
  async rebuild(tenantId: string): Promise<{ outer: number; inner: Report }> {
    return this.locks.withLock(`report:${tenantId}`, async (lock) => ({
      outer: lock.fence,
      inner: await this.build(tenantId),
    }));
  }
}
