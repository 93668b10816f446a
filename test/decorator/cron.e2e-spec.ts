/**
 * `@Cron` + `@Locked(…, { onBusy: 'skip' })` on two app instances sharing one Redis: one run per
 * tick, with `@Locked` above or below `@Cron`. The same job without the lock runs on both.
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
    runs.push({ job, instance: this.instance, tick: Math.round(Date.now() / 1000) });
    // Longer than the gap between the two instances' timers, shorter than a tick.
    await sleep(300);
  }

  @Cron(EVERY_SECOND)
  @Locked('settle', { onBusy: 'skip' })
  async settle(): Promise<void> {
    await this.run('locked-below-cron');
  }

  @Locked('report', { onBusy: 'skip' })
  @Cron(EVERY_SECOND)
  async report(): Promise<void> {
    await this.run('locked-above-cron');
  }

  @Cron(EVERY_SECOND)
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
  });

  afterAll(async () => {
    await Promise.all(apps.map((app) => app.close()));
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('runs each locked job once per tick, with @Locked above or below @Cron', async () => {
    // Watch three ticks (runs start at ~.000 s and last 300 ms), then stop at ~.500 s, between ticks.
    await sleep(3_000 - (Date.now() % 1000) + 500);
    await Promise.all(apps.map((app) => app.close()));
    apps = [];

    const unlocked = perTick('unlocked');
    expect(unlocked.length).toBeGreaterThanOrEqual(3);
    // Control: without the lock, both instances run the job on every tick.
    expect(unlocked.every((count) => count === 2)).toBe(true);

    for (const job of ['locked-below-cron', 'locked-above-cron']) {
      const counts = perTick(job);
      // At least every tick the control saw (@nestjs/schedule may run a job at once at start-up,
      // "missed execution deadline", which can add one tick to one job).
      expect({ job, ticks: counts.length }).toEqual({
        job,
        ticks: Math.max(counts.length, unlocked.length),
      });
      expect({ job, counts }).toEqual({ job, counts: counts.map(() => 1) });
    }
    expect(await redis.exists(`${prefix}{settle}`, `${prefix}{report}`)).toBe(0);
  });
});
