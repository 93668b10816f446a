/**
 * The runnable examples of docs/multi-key.md: keep the two in step. The service and the route
 * (test/docs-examples/wallets.ts) run on the shared Redis, the route through HTTP.
 */
import type { INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { LockService, RedisLockModule } from 'nestjs-redis-lock';
import { deleteKeys, redisClient, SHARED_REDIS_URL } from '../support/shared-redis';
import { uniquePrefix } from '../support/unique-prefix';
import { Ledger, Merges, Transfers, TransfersController } from './wallets';

class MemoryLedger extends Ledger {
  readonly balances = new Map<string, number>([
    ['ann', 100],
    ['bob', 100],
    ['cat', 0],
    ['dan', 0],
  ]);
  readonly fences = new Map<string, number>();
  async balance(account: string): Promise<number> {
    return this.balances.get(account) ?? 0;
  }
  async write(account: string, balance: number, fence: number): Promise<void> {
    if (fence < (this.fences.get(account) ?? 0)) throw new Error('stale holder');
    this.fences.set(account, fence);
    await new Promise((resolve) => setTimeout(resolve, 2));
    this.balances.set(account, balance);
  }
}

const prefix = uniquePrefix('docs-multi-key');
const redis = redisClient();
const ledger = new MemoryLedger();
let app: INestApplication;

beforeAll(async () => {
  const moduleRef = await Test.createTestingModule({
    imports: [RedisLockModule.forRoot({ redis: SHARED_REDIS_URL, prefix })],
    controllers: [TransfersController],
    providers: [Transfers, Merges, { provide: Ledger, useValue: ledger }],
  }).compile();
  app = moduleRef.createNestApplication({ logger: false });
  await app.init();
});

afterAll(async () => {
  await app?.close();
  await deleteKeys(redis, prefix);
  await redis.quit();
});

it('moves money both ways at once without losing any (LockService.withLock([...]))', async () => {
  const transfers = app.get(Transfers);
  await Promise.all(
    Array.from({ length: 20 }, (_, i) =>
      i % 2 ? transfers.move('ann', 'bob', 3) : transfers.move('bob', 'ann', 2),
    ),
  );
  expect(ledger.balances.get('ann')! + ledger.balances.get('bob')!).toBe(200);
  expect(ledger.balances.get('ann')).toBe(100 - 30 + 20);
});

it('runs the route under both keys, and answers 409 + Retry-After while one is held', async () => {
  await request(app.getHttpServer())
    .post('/transfers')
    .send({ from: 'ann', to: 'bob', amount: 1 })
    .expect(201);
  const held = await app.get(LockService).acquire('account:bob');
  try {
    const busy = await request(app.getHttpServer())
      .post('/transfers')
      .send({ from: 'ann', to: 'bob', amount: 1 })
      .expect(409);
    expect(busy.headers['retry-after']).toBe('1');
  } finally {
    await held.release();
  }
});

it('moves nothing when both keys name one account (the keys collapse into one lock)', async () => {
  const before = ledger.balances.get('ann')! + ledger.balances.get('bob')!;
  await app.get(Transfers).move('ann', 'ann', 5);
  expect(ledger.balances.get('ann')! + ledger.balances.get('bob')!).toBe(before);
});

it('merges a list of accounts under a key function that returns all their keys', async () => {
  const total = (): number => [...ledger.balances.values()].reduce((sum, one) => sum + one, 0);
  const before = total();
  ledger.balances.set('cat', 7);
  ledger.balances.set('dan', 5);
  // A transfer on two of the accounts at the same time: it waits for the merge, or the other way.
  await Promise.all([
    app.get(Merges).merge('cat', ['dan', 'dan', 'bob']),
    app.get(Transfers).move('bob', 'dan', 4),
  ]);
  expect(total()).toBe(before + 12);
  expect(await app.get(LockService).isLocked('account:cat')).toBe(false);
});
