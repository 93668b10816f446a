/**
 * A transient factory provider consumed by a singleton is called at bootstrap, before the explorer
 * wraps factories: what it built then must get its module's LockService too.
 */
import { Inject, Injectable, Module, Scope } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { currentLock, Locked, RedisLockModule } from 'nestjs-redis-lock';
import { randomUUID } from 'node:crypto';
import { SHARED_REDIS_URL } from '../support/shared-redis';

class Worker {
  @Locked('work:<id>')
  async run(id: string): Promise<string | undefined> {
    return currentLock()?.key ?? `unlocked ${id}`;
  }
}

@Injectable()
class Boss {
  constructor(@Inject('WORKER') readonly worker: Worker) {}
}

@Module({
  imports: [
    RedisLockModule.forRoot({
      redis: SHARED_REDIS_URL,
      prefix: `review-tf:${randomUUID()}:`,
    }),
  ],
  providers: [{ provide: 'WORKER', scope: Scope.TRANSIENT, useFactory: () => new Worker() }, Boss],
})
class AppModule {}

it('a transient factory result injected into a singleton locks its @Locked method', async () => {
  const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
  const app = moduleRef.createNestApplication();
  await app.init();
  try {
    await expect(app.get(Boss).worker.run('1')).resolves.toBe('work:1');
  } finally {
    await app.close();
  }
});
