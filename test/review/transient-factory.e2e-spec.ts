/**
 * Review finding: a transient factory provider consumed by a singleton is called at bootstrap,
 * before the explorer wraps factories (onModuleInit), and the explorer binds static instances
 * only: what it built has no LockService.
 */
import { Inject, Injectable, Module, Scope } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { currentLock, Locked, RedisLockModule } from 'nestjs-redis-lock';
import { randomUUID } from 'node:crypto';

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
      redis: 'redis://127.0.0.1:6379',
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
