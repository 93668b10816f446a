/**
 * `@WhenLeader` in an app on `RedisLockTestingModule` (the memory store, no Redis): the module
 * campaigns for the decorated role at bootstrap, the method runs while leading and is skipped
 * once the replica resigned, other decorators' metadata survives, and shutdown resigns.
 */
import { Injectable } from '@nestjs/common';
import { Cron, SchedulerRegistry, ScheduleModule } from '@nestjs/schedule';
import { Test } from '@nestjs/testing';
import { LockService, WhenLeader } from 'nestjs-redis-lock';
import { RedisLockTestingModule } from 'nestjs-redis-lock/testing';
import { waitFor } from '../support/time';

@Injectable()
class Jobs {
  runs = 0;

  @Cron('0 0 1 1 *', { name: 'yearly' })
  @WhenLeader('jobs')
  async yearly(): Promise<string> {
    this.runs++;
    return 'ran';
  }
}

it('runs a @WhenLeader method only while leading, and resigns at shutdown', async () => {
  const moduleRef = await Test.createTestingModule({
    imports: [ScheduleModule.forRoot(), RedisLockTestingModule.forRoot({ shutdownGrace: 1_000 })],
    providers: [Jobs],
  }).compile();
  const app = moduleRef.createNestApplication();
  await app.init();
  const locks = app.get(LockService);
  const jobs = app.get(Jobs);
  expect(app.get(SchedulerRegistry).getCronJob('yearly')).toBeDefined(); // @Cron kept
  const leadership = locks.leadership('jobs')!;
  expect(leadership).toBeDefined(); // campaigned at bootstrap
  await waitFor(() => leadership.isLeader, 2_000);
  expect(await jobs.yearly()).toBe('ran');
  const revoked: string[] = [];
  locks.on('revoked', ({ reason }) => void revoked.push(reason));
  await app.close();
  expect(revoked).toEqual(['resigned']);
  expect(await jobs.yearly()).toBeUndefined(); // skipped: no campaign any more
  expect(jobs.runs).toBe(1);
});
