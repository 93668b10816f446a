/**
 * The runnable examples of docs/semaphores.md (test/docs-examples/exports.ts): keep the two in
 * step. Two app instances on the shared Redis share each tenant's 3 permits.
 */
import type { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { RedisLockModule } from 'nestjs-redis-lock';
import { deleteKeys, redisClient, SHARED_REDIS_URL } from '../support/shared-redis';
import { Gate, waitFor } from '../support/time';
import { uniquePrefix } from '../support/unique-prefix';
import { ExportController, ExportJob, ExportService } from './exports';

const prefix = uniquePrefix('docs-semaphores');
const redis = redisClient();
const gate = new Gate();
let running = 0;
const job: ExportJob = {
  async run(tenantId) {
    running++;
    await gate.opened;
    running--;
    return tenantId;
  },
};

async function appInstance(): Promise<INestApplication> {
  const moduleRef = await Test.createTestingModule({
    imports: [RedisLockModule.forRoot({ redis: SHARED_REDIS_URL, prefix })],
    controllers: [ExportController],
    providers: [ExportService, { provide: ExportJob, useValue: job }],
  }).compile();
  const app = moduleRef.createNestApplication({ logger: false });
  await app.listen(0, '127.0.0.1');
  return app;
}

let apps: INestApplication[] = [];
beforeAll(async () => (apps = [await appInstance(), await appInstance()]));
afterAll(async () => {
  gate.release();
  await Promise.all(apps.map((app) => app.close()));
  await deleteKeys(redis, prefix);
  await redis.quit();
});

it('shares 3 permits per tenant across two instances: the service waits, the route answers 409', async () => {
  const [a, b] = apps as [INestApplication, INestApplication];
  const exports = [
    a.get(ExportService).export('acme'),
    b.get(ExportService).export('acme'),
    a.get(ExportService).exportByHand('acme'),
  ];
  await waitFor(() => running === 3);
  const waiting = b.get(ExportService).export('acme'); // the 4th waits for a permit
  const refused = await request(a.getHttpServer()).post('/exports/acme');
  expect(refused.status).toBe(409);
  expect(refused.headers['retry-after']).toBeDefined();
  expect(running).toBe(3);
  gate.release(); // the first three finish; the 4th gets a permit
  await waitFor(() => running === 1);
  gate.release();
  expect(await Promise.all([...exports, waiting])).toEqual(['acme', 'acme', 'acme', 'acme']);
});
