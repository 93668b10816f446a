/**
 * The fair-order example of docs/semaphores.md (test/docs-examples/partner-quotes.ts): keep the
 * two in step. Two app instances on the shared Redis share the partner's 2 permits; the calls
 * that wait are served in the order they asked, whichever instance made them.
 */
import type { INestApplicationContext } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { RedisLockModule } from 'nestjs-redis-lock';
import { deleteKeys, redisClient, SHARED_REDIS_URL } from '../support/shared-redis';
import { Gate, waitFor } from '../support/time';
import { uniquePrefix } from '../support/unique-prefix';
import { PartnerApi, QuoteService } from './partner-quotes';

const prefix = uniquePrefix('docs-fair-semaphores');
const redis = redisClient();
const queueKey = `${prefix}{partner:quotes}:permits:queue`;
/** Each call to the partner waits for its own gate; `started` lists the orders, in call order. */
const gates = new Map<string, Gate>();
const started: string[] = [];
const partner: PartnerApi = {
  async quote(orderId) {
    started.push(orderId);
    const gate = new Gate();
    gates.set(orderId, gate);
    await gate.opened;
    return orderId.length;
  },
};

async function appInstance(): Promise<INestApplicationContext> {
  const moduleRef = await Test.createTestingModule({
    imports: [RedisLockModule.forRoot({ redis: SHARED_REDIS_URL, prefix, fair: true })],
    providers: [QuoteService, { provide: PartnerApi, useValue: partner }],
  }).compile();
  return moduleRef.init();
}

let apps: INestApplicationContext[] = [];
beforeAll(async () => (apps = [await appInstance(), await appInstance()]));
afterAll(async () => {
  for (const gate of gates.values()) gate.release();
  await Promise.all(apps.map((app) => app.close()));
  await deleteKeys(redis, prefix);
  await redis.quit();
});

it('runs 2 partner calls at once and serves the waiting ones in the order they asked', async () => {
  const [a, b] = apps.map((app) => app.get(QuoteService)) as [QuoteService, QuoteService];
  const calls = [a.quote('first')];
  await waitFor(() => started.length === 1);
  calls.push(b.quote('second'));
  await waitFor(() => started.length === 2);
  // Four more, alternating instances, each queued before the next asks.
  for (const [i, orderId] of ['w1', 'w2', 'w3', 'w4'].entries()) {
    calls.push((i % 2 ? a : b).quote(orderId));
    await waitFor(async () => (await redis.zcard(queueKey)) === i + 1);
  }
  // Each finished call hands its permit to the first in line.
  for (const [i, done] of ['first', 'second', 'w1', 'w2'].entries()) {
    gates.get(done)!.release();
    await waitFor(() => started.length === 3 + i);
  }
  expect(started).toEqual(['first', 'second', 'w1', 'w2', 'w3', 'w4']);
  for (const orderId of ['w3', 'w4']) gates.get(orderId)!.release();
  expect(await Promise.all(calls)).toEqual([5, 6, 2, 2, 2, 2]);
});
