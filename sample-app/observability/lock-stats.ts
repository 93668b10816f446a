import { Controller, Delete, Get, HttpCode, Injectable, type OnModuleInit } from '@nestjs/common';
import { LockService } from 'nestjs-redis-lock';

/** Waits kept per key family; the percentiles are over these. */
const MAX_WAITS = 10_000;

/** What one family of lock keys (`order`, `stock`, `settlement`: the key up to its first `:`) saw. */
export interface LockFamilyStats {
  /** `'acquired'` events since the start or the last reset (the waits: the latest 10 000). */
  acquired: number;
  busy: number;
  /** Acquire wait (`waitedMs` of `'acquired'`), ms, median and 99th percentile. */
  waitP50Ms: number;
  waitP99Ms: number;
}

/**
 * Counts this replica's lock events through the typed `LockService.on()` — acquire waits and busy
 * refusals, per key family — for `npm run demo`, which reads them at `GET /lock-stats` after the
 * burst. A real app would read the same from `/metrics`; the events give exact per-call figures
 * without a histogram's buckets.
 */
@Injectable()
export class LockStats implements OnModuleInit {
  private waits = new Map<string, number[]>();
  private acquired = new Map<string, number>();
  private busy = new Map<string, number>();

  constructor(private readonly locks: LockService) {}

  onModuleInit(): void {
    this.locks
      .on('acquired', ({ key, waitedMs }) => {
        const family = familyOf(key);
        this.acquired.set(family, (this.acquired.get(family) ?? 0) + 1);
        const waits = this.waits.get(family) ?? [];
        // A replica runs for days (the cron job locks every second): keep the latest waits only.
        if (waits.length >= MAX_WAITS) waits.shift();
        waits.push(waitedMs);
        this.waits.set(family, waits);
      })
      .on('busy', ({ key }) => {
        const family = familyOf(key);
        this.busy.set(family, (this.busy.get(family) ?? 0) + 1);
      });
  }

  snapshot(): Record<string, LockFamilyStats> {
    const families = new Set([...this.waits.keys(), ...this.busy.keys()]);
    return Object.fromEntries(
      [...families].sort().map((family) => {
        const waits = [...(this.waits.get(family) ?? [])].sort((a, b) => a - b);
        return [
          family,
          {
            acquired: this.acquired.get(family) ?? 0,
            busy: this.busy.get(family) ?? 0,
            waitP50Ms: percentile(waits, 0.5),
            waitP99Ms: percentile(waits, 0.99),
          },
        ];
      }),
    );
  }

  reset(): void {
    this.waits = new Map();
    this.acquired = new Map();
    this.busy = new Map();
  }
}

/** `GET /lock-stats` (what `LockStats` counted), `DELETE /lock-stats` (start over: after a warm-up). */
@Controller('lock-stats')
export class LockStatsController {
  constructor(private readonly stats: LockStats) {}

  @Get()
  read(): Record<string, LockFamilyStats> {
    return this.stats.snapshot();
  }

  @Delete()
  @HttpCode(204)
  reset(): void {
    this.stats.reset();
  }
}

function familyOf(key: string): string {
  return key.split(':', 1)[0] ?? key;
}

/** Nearest-rank percentile of sorted values, rounded to 0.1 ms; 0 when there are none. */
function percentile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return 0;
  const value = sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? 0;
  return Math.round(value * 10) / 10;
}
