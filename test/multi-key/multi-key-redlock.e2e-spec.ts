/**
 * Multi-key locks on Redlock (3 independent primaries): no script can see every node, so the keys
 * are taken one by one in lock order and rolled back when one is busy. All or nothing, no deadlock
 * between opposite orders, one key lost loses the set.
 */
import { Logger } from '@nestjs/common';
import { LockNotAcquiredError, type LockService } from 'nestjs-redis-lock';
import { lockServices, warmedUp } from '../support/lock-services';
import {
  expectNoDeadlockBetweenOrders,
  expectOneKeyLostLosesTheSet,
} from '../support/multi-key-cases';
import type { RedisServer } from '../support/redis-server';
import { stopAllRedis } from '../support/redis-server';
import { startIndependentPrimaries } from '../support/topologies';
import { uniquePrefix } from '../support/unique-prefix';

const prefix = uniquePrefix('multi-redlock');
const services = lockServices({ prefix });
let nodes: RedisServer[] = [];
let first: LockService;
let second: LockService;

beforeAll(async () => {
  jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  nodes = await startIndependentPrimaries(3);
  const redlock = { nodes: nodes.map((node) => node.url), restartGrace: 0 };
  // Connected before the first test, whose first calls have nodeTimeout (200 ms) on every node.
  first = await warmedUp(services.create({ redlock, ttl: 3_000 }));
  second = await warmedUp(services.create({ redlock, ttl: 3_000 }));
}, 30_000);

afterAll(async () => {
  await services.closeAll();
  await stopAllRedis();
  jest.restoreAllMocks();
});

describe('multi-key locks on Redlock', () => {
  it('is all or nothing: a busy key leaves none of the others held', async () => {
    const busy = await second.acquire('r1:b');
    expect(await first.tryAcquire(['r1:a', 'r1:b', 'r1:c'])).toBeNull();
    await expect(first.acquire(['r1:c', 'r1:b', 'r1:a'], { wait: 200 })).rejects.toThrow(
      LockNotAcquiredError,
    );
    expect(await second.isLocked('r1:a')).toBe(false);
    expect(await second.isLocked('r1:c')).toBe(false);
    await busy.release();
    const lock = await first.acquire(['r1:c', 'r1:b', 'r1:a']);
    expect(lock.keys).toEqual(['r1:a', 'r1:b', 'r1:c']);
    expect(await second.isLocked('r1:b')).toBe(true);
    await lock.release();
    expect(await second.isLocked('r1:b')).toBe(false);
  });

  it('never deadlocks: [a, b] against [b, a], many times at once', async () => {
    await expectNoDeadlockBetweenOrders([first, second], ['r2:a', 'r2:b'], { calls: 30 });
  }, 40_000);

  it('loses the whole set when one key is lost, and releases the others', async () => {
    await expectOneKeyLostLosesTheSet(first, second, ['r3:b', 'r3:a']);
  });
});
