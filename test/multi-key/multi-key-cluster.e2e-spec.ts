/**
 * Multi-key locks on a 3-primary Redis Cluster. Keys on several slots are taken one by one in
 * one global order and rolled back when one cannot be had: all or nothing, and no deadlock between
 * callers naming the same keys in opposite orders (the control, which takes them in the order
 * given, deadlocks). Keys that share a slot are taken by the one-script path.
 */
import { Logger } from '@nestjs/common';
import { LockNotAcquiredError, type LockService } from 'nestjs-redis-lock';
import { clusterSlot } from '../../lib/redis/cluster-slot';
import { redisKeyOf } from '../support/lock-services';
import {
  expectNoDeadlockBetweenOrders,
  expectOneKeyLostLosesTheSet,
} from '../support/multi-key-cases';
import { onOwnCluster } from '../support/own-cluster';
import { sleep } from '../support/time';

const cluster = onOwnCluster('multi-cluster');
const { prefix } = cluster;
let first: LockService;
let second: LockService;

const held = async (...keys: string[]): Promise<number> => {
  const answers = await Promise.all(
    keys.map((key) => cluster.admin.exists(redisKeyOf(prefix, key))),
  );
  return answers.reduce((sum, one) => sum + one, 0);
};

/** Two keys whose slots differ (so no script can take both), named from `base`. */
const twoSlots = (base: string): [string, string] => {
  const a = `${base}:a`;
  for (let i = 0; ; i++) {
    const b = `${base}:b${i}`;
    if (clusterSlot(b) !== clusterSlot(a)) return [a, b];
  }
};

beforeAll(() => {
  jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  first = cluster.service({ ttl: 3_000 });
  second = cluster.service({ ttl: 3_000 });
});

afterAll(() => jest.restoreAllMocks());

describe('multi-key locks on a Cluster, keys on several slots', () => {
  it('holds every key and releases them all', async () => {
    const [a, b] = twoSlots('c1');
    const lock = await first.acquire([b, a]);
    expect(lock.keys).toHaveLength(2);
    expect(Object.keys(lock.fences).sort()).toEqual([a, b].sort());
    expect(await held(a, b)).toBe(2);
    expect(await lock.release()).toBe(true);
    expect(await held(a, b)).toBe(0);
  });

  it('is all or nothing: a busy key leaves none of the others held', async () => {
    const [a, b] = twoSlots('c2');
    const [c] = twoSlots('c2x');
    const busy = await second.acquire(b);
    expect(await first.tryAcquire([a, b, c])).toBeNull();
    expect(await held(a, c)).toBe(0);
    await expect(first.acquire([c, b, a], { wait: 300 })).rejects.toThrow(LockNotAcquiredError);
    expect(await held(a, c)).toBe(0);
    await busy.release();
    const lock = await first.acquire([a, b, c]);
    expect(await held(a, b, c)).toBe(3);
    await lock.release();
  });

  it('never deadlocks: [a, b] against [b, a], many times at once', async () => {
    const [a, b] = twoSlots('c3');
    await expectNoDeadlockBetweenOrders([first, second], [a, b], { calls: 60 });
    expect(await held(a, b)).toBe(0);
  }, 40_000);

  it('control: taking the keys in the order given deadlocks (calls time out)', async () => {
    const [a, b] = twoSlots('c4');
    const naive = async (service: LockService, keys: string[]) => {
      const one = await service.acquire(keys[0]!, { wait: 300 });
      try {
        await sleep(20);
        const two = await service.acquire(keys[1]!, { wait: 300 });
        await two.release();
      } finally {
        await one.release();
      }
    };
    const calls = Array.from({ length: 10 }, (_, i) =>
      i % 2 ? naive(first, [a, b]) : naive(second, [b, a]),
    );
    const outcomes = await Promise.allSettled(calls);
    const timedOut = outcomes.filter(
      (outcome) => outcome.status === 'rejected' && outcome.reason instanceof LockNotAcquiredError,
    );
    expect(timedOut.length).toBeGreaterThan(0);
  }, 20_000);

  it('loses the whole set when one key is lost, and releases the others', async () => {
    await expectOneKeyLostLosesTheSet(first, second, twoSlots('c5'));
  });
});

describe('multi-key locks on a Cluster, keys of one slot', () => {
  it('takes them in one step: all or nothing', async () => {
    const bySlot = new Map<number, string>();
    let pair: [string, string] | undefined;
    for (let i = 0; !pair; i++) {
      const key = `c6:${i}`;
      const other = bySlot.get(clusterSlot(key));
      if (other) pair = [other, key];
      else bySlot.set(clusterSlot(key), key);
    }
    const [a, b] = pair;
    const busy = await second.acquire(b);
    expect(await first.tryAcquire([a, b])).toBeNull();
    expect(await held(a)).toBe(0);
    await busy.release();
    const lock = await first.acquire([a, b]);
    expect(await held(a, b)).toBe(2);
    await lock.release();
    expect(await held(a, b)).toBe(0);
  });
});
