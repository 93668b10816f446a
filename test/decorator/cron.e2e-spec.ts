/**
 * `@Cron` + `@Locked(…, { onBusy: 'skip', minHold })` on two app instances sharing one Redis: one
 * run per tick, with `@Locked` above or below `@Cron`. The same job without the lock runs on both.
 *
 * Timing is bounded, not assumed: each job's `threshold` makes `cron` skip a tick whose timer fires
 * more than THRESHOLD_MS late (a loaded machine), so every run that happens starts within that of
 * its scheduled second — well inside the minimum hold, and inside the rounding to a tick. Runs are
 * recorded only from the first whole second after both apps started (no start-up catch-up runs).
 */
import { Injectable, type INestApplication } from '@nestjs/common';
import { Cron, ScheduleModule } from '@nestjs/schedule';
import type Redis from 'ioredis';
import { Locked } from 'nestjs-redis-lock';
import { deleteKeys, redisClient } from '../support/shared-redis';
import { sleep } from '../support/time';
import { uniquePrefix } from '../support/unique-prefix';
import { createDecoratorApp } from './decorator-app';

const prefix = uniquePrefix('decorator-cron');
const EVERY_SECOND = '* * * * * *';
/** A timer later than this skips its tick (`cron`'s own rule), so runs start near their second. */
const THRESHOLD_MS = 300;
/** Longer than any lateness a run can have, shorter than a tick minus that lateness. */
const MIN_HOLD = 600;
const TICK = { threshold: THRESHOLD_MS };
/** Runs before this instant are start-up noise (set once both apps are up). */
let recordFrom = Number.POSITIVE_INFINITY;

interface Run {
  job: string;
  instance: number;
  tick: number;
}
const runs: Run[] = [];
let instances = 0;

@Injectable()
class SettlementJobs {
  private readonly instance = ++instances;

  private async run(job: string): Promise<void> {
    const now = Date.now();
    if (now >= recordFrom)
      runs.push({ job, instance: this.instance, tick: Math.round(now / 1000) });
    // A fast job: without `minHold` the key would be free before the other instance's timer fired.
    await sleep(20);
  }

  @Cron(EVERY_SECOND, TICK)
  @Locked('settle', { onBusy: 'skip', minHold: MIN_HOLD })
  async settle(): Promise<void> {
    await this.run('locked-below-cron');
  }

  @Locked('report', { onBusy: 'skip', minHold: MIN_HOLD })
  @Cron(EVERY_SECOND, TICK)
  async report(): Promise<void> {
    await this.run('locked-above-cron');
  }

  @Cron(EVERY_SECOND, TICK)
  async unlocked(): Promise<void> {
    await this.run('unlocked');
  }
}

/** Runs of `job`, counted per tick. */
function perTick(job: string): number[] {
  const counts = new Map<number, number>();
  for (const run of runs.filter((r) => r.job === job)) {
    counts.set(run.tick, (counts.get(run.tick) ?? 0) + 1);
  }
  return [...counts.values()];
}

describe("@Cron + @Locked({ onBusy: 'skip' }) on two app instances", () => {
  let apps: INestApplication[] = [];
  let redis: Redis;

  beforeAll(async () => {
    redis = redisClient();
    apps = await Promise.all(
      [1, 2].map(() =>
        createDecoratorApp({
          prefix,
          imports: [ScheduleModule.forRoot()],
          providers: [SettlementJobs],
        }),
      ),
    );
    recordFrom = Math.ceil(Date.now() / 1000) * 1000;
  });

  afterAll(async () => {
    await Promise.all(apps.map((app) => app.close()));
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('runs each locked job once per tick, with @Locked above or below @Cron', async () => {
    // Watch four ticks from `recordFrom`, then stop at ~.500 s, between ticks.
    await sleep(Math.max(0, recordFrom - Date.now()) + 3_500);
    await Promise.all(apps.map((app) => app.close()));
    apps = [];

    const unlocked = perTick('unlocked');
    // Control: without the lock, both instances run the job in the same tick.
    expect(unlocked.some((count) => count === 2)).toBe(true);

    for (const job of ['locked-below-cron', 'locked-above-cron']) {
      const counts = perTick(job);
      // A tick both timers skipped (later than the threshold) has no run; most ticks have one.
      expect({ job, ran: counts.length >= 2 }).toEqual({ job, ran: true });
      expect({ job, counts }).toEqual({ job, counts: counts.map(() => 1) });
    }
    // Closed apps left nothing but the minimum hold's remainder, which Redis expires.
    for (const key of [`${prefix}{settle}`, `${prefix}{report}`]) {
      expect(await redis.pttl(key)).toBeLessThanOrEqual(MIN_HOLD);
    }
  });
});
