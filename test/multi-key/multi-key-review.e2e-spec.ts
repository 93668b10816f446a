/**
 * Review findings on multi-key locks (one Redis): each test failed on the code before its fix.
 */
import { LockKeyError, LockNotAcquiredError } from 'nestjs-redis-lock';
import { onSharedRedis } from '../support/lock-services';
import { now, sleep } from '../support/time';

const { services, redis, keyOf } = onSharedRedis('multi-key-review');
const locks = services.create({ ttl: 20_000 });
const other = services.create({ ttl: 20_000 });

describe('multi-key wake-ups', () => {
  it('passes on a wake-up it took for a key it then stopped waiting on (another key is busy)', async () => {
    // Both keys held elsewhere, with long leases: a waiter's fallback timer is far past its budget.
    const heldA = await other.acquire('wk1:a');
    const heldB = await other.acquire('wk1:b');
    // The multi-key call waits on `a` (the first busy key in lock order) and is the longest waiter.
    const multi = locks.acquire(['wk1:a', 'wk1:b'], { wait: 30_000 });
    await sleep(200);
    // A single-key call in the same process waits on `a` after it.
    const single = locks.acquire('wk1:a', { wait: 15_000 }).catch((error: unknown) => error);
    await sleep(200);
    const releasedAt = now();
    // `a` is released: one wake-up for this process, to the longest waiter — the multi-key call,
    // which then finds `b` busy and moves on to wait for `b`. `a` is free: the single call must
    // be woken and get it, not sleep to its fallback (its whole 15 s budget; the lease runs 20 s).
    await heldA.release();
    const got = await single;
    expect(got).not.toBeInstanceOf(LockNotAcquiredError);
    expect(now() - releasedAt).toBeLessThan(5_000);
    if (got instanceof LockNotAcquiredError) throw got;
    await (got as { release(): Promise<boolean> }).release();
    await heldB.release();
    const set = await multi; // `b` was released: the multi-key call gets the set now
    expect(set.keys).toEqual(['wk1:a', 'wk1:b']);
    await set.release();
  });
});

describe('bad keys inside a locked section', () => {
  it('are refused with LockKeyError, as outside one (not a TypeError, not LockReentryError)', async () => {
    const bad = (keys: unknown) => keys as string[];
    const refusals = async () => [
      await locks.withLock(bad(['bk1:a', 42]), () => 1).catch((error: unknown) => error),
      await locks.withLock(['bk1:a', ''], () => 1).catch((error: unknown) => error),
      await locks.withLock(bad(['bk1:a', 'x'.repeat(10_000)]), () => 1).catch((e: unknown) => e),
      await locks.withLock(bad(42) as unknown as string, () => 1).catch((e: unknown) => e),
    ];
    // The control: outside any lock, each is a LockKeyError.
    for (const error of await refusals()) expect(error).toBeInstanceOf(LockKeyError);
    // Inside a section holding bk1:a (and bk1:b), the same calls must fail the same way.
    await locks.withLock(['bk1:a', 'bk1:b'], async () => {
      for (const error of await refusals()) expect(error).toBeInstanceOf(LockKeyError);
    });
  });
});

describe('the end of a multi-key wait', () => {
  it('tries once more at its deadline, as a single-key wait does (a release message was lost)', async () => {
    // The holders' keys vanish without a release message (deleted here; a lost message, a
    // failover): each waiter sleeps to its fallback, capped by its budget, then tries again.
    const single = await other.acquire('dl1:c');
    const multi = await other.acquire('dl1:b');
    const waitingOne = locks.acquire('dl1:c', { wait: 1_500 }).catch((e: unknown) => e);
    const waitingSet = locks.acquire(['dl1:a', 'dl1:b'], { wait: 1_500 }).catch((e: unknown) => e);
    await sleep(300);
    await redis.del(keyOf('dl1:c'), keyOf('dl1:b'));
    // The control: the single-key call's last try at its deadline finds the key free.
    const one = await waitingOne;
    expect(one).not.toBeInstanceOf(LockNotAcquiredError);
    // So must the multi-key call's: every key is free at its deadline.
    const set = await waitingSet;
    expect(set).not.toBeInstanceOf(LockNotAcquiredError);
    for (const lock of [one, set] as { release(): Promise<boolean> }[]) await lock.release?.();
    await Promise.all([single.release(), multi.release()]);
  });
});
