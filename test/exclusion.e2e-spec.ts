/**
 * Exclusion, no deadlock, and "only the owner releases", against the shared Redis.
 */
import { LockLostError, LockNotAcquiredError, type LockHandle } from 'nestjs-redis-lock';
import { killAllWorkers, spawnWorker } from './support/processes';
import { now, sleep, waitFor } from './support/time';
import { onSharedRedis } from './support/lock-services';
import { SHARED_REDIS_URL } from './support/shared-redis';

const { prefix, redis, services, keyOf } = onSharedRedis('exclusion');
afterAll(() => killAllWorkers()); // also those of a test that failed midway

describe('mutual exclusion', () => {
  it('grants a key to one holder at a time', async () => {
    const a = services.create();
    const b = services.create();

    const first = await a.acquire('order:1');
    expect(await redis.get(keyOf('order:1'))).toBe(first.token);
    await expect(b.acquire('order:1')).rejects.toBeInstanceOf(LockNotAcquiredError);
    expect(await b.tryAcquire('order:1')).toBeNull();
    // acquire() is not re-entrant: the same service is turned away too.
    expect(await a.tryAcquire('order:1')).toBeNull();

    expect(await first.release()).toBe(true);
    const second = await b.acquire('order:1');
    expect(second.token).not.toBe(first.token);
    expect(await second.release()).toBe(true);
  });

  it('grants exactly one of many simultaneous acquires of a free key', async () => {
    const instances = [1, 2, 3, 4].map(() => services.create());
    const attempts = await Promise.all(
      Array.from({ length: 24 }, (_, i) => instances[i % instances.length]!.tryAcquire('race')),
    );
    const granted = attempts.filter((lock): lock is LockHandle => lock !== null);
    expect(granted).toHaveLength(1);
    // Every other try came after the grant (the key was free before it) and was refused by it,
    // marking the lease as waited for.
    expect(await redis.get(keyOf('race'))).toBe(`*${granted[0]!.token}`);
    await granted[0]!.release();
  });

  it('locks distinct keys independently', async () => {
    const locks = services.create();
    const [x, y] = await Promise.all([locks.acquire('user:1'), locks.acquire('user:2')]);
    expect(x.token).not.toBe(y.token);
    await Promise.all([x.release(), y.release()]);
  });

  it('tryAcquire() resolves null at once while the key is held, without waiting for the lease', async () => {
    // A module-wide wait budget must not make tryAcquire wait.
    const holder = services.create();
    const other = services.create({ wait: 5_000 });
    const held = await holder.acquire('nightly-job', { ttl: 10_000 });

    const started = now();
    expect(await other.tryAcquire('nightly-job')).toBeNull();
    expect(now() - started).toBeLessThan(1_000);

    await held.release();
  });
});

describe('no deadlock', () => {
  it('frees the lock of a holder process killed by SIGKILL within its ttl (+1 s)', async () => {
    const ttl = 1_000;
    const locks = services.create();
    const holder = spawnWorker('test/fixtures/hold-lock-worker.ts', {
      REDIS_URL: SHARED_REDIS_URL,
      PREFIX: prefix,
      KEY: 'crash',
      TTL: String(ttl),
    });
    const [, token] = await holder.waitForOutput(/^acquired (.+) (\d+)$/m);
    expect(await redis.get(keyOf('crash'))).toBe(token);

    // Alive, the holder keeps its lock past one lease (its watchdog renews it).
    await sleep(ttl * 1.5);
    expect(await locks.tryAcquire('crash')).toBeNull();

    holder.kill('SIGKILL');
    const killedAt = now();
    const lock = await locks.acquire('crash', { wait: ttl + 1_000 });
    expect(now() - killedAt).toBeLessThanOrEqual(ttl + 1_000);
    expect((await holder.exited).signal).toBe('SIGKILL');
    await lock.release();
  });
});

describe('only the owner releases or extends', () => {
  /** Asserts the lock key holds `owner`'s token with a live lease. */
  async function expectIntact(key: string, owner: LockHandle): Promise<void> {
    expect(await redis.get(keyOf(key))).toBe(owner.token);
    expect(await redis.pttl(keyOf(key))).toBeGreaterThan(0);
  }

  it("does not let a holder whose lease expired extend or delete the new owner's lock", async () => {
    const a = services.create();
    const b = services.create();
    const stale = await a.acquire('expired', { ttl: 200, renew: false });
    await waitFor(async () => (await redis.exists(keyOf('expired'))) === 0);
    const owner = await b.acquire('expired');

    await expect(stale.extend()).rejects.toBeInstanceOf(LockLostError);
    await expectIntact('expired', owner);
    expect(await stale.release()).toBe(false);
    await expectIntact('expired', owner);

    expect(stale.isHeld).toBe(false);
    expect(stale.signal.reason).toBeInstanceOf(LockLostError);
    // Its lease ran out on its own (monotonic) clock first: the watchdog declared it lost then.
    expect((stale.signal.reason as LockLostError).reason).toBe('deadline');
    expect(await owner.release()).toBe(true);
  });

  it("does not let a holder whose key was deleted release or extend the new owner's lock", async () => {
    const a = services.create();
    const b = services.create();
    const lost = jest.fn();
    a.on('lost', lost);
    const stale = await a.acquire('deleted', { ttl: 10_000 });
    await redis.del(keyOf('deleted'));
    const owner = await b.acquire('deleted');

    expect(await stale.release()).toBe(false);
    await expectIntact('deleted', owner);
    await expect(stale.extend()).rejects.toBeInstanceOf(LockLostError);
    await expectIntact('deleted', owner);

    expect(lost).toHaveBeenCalledTimes(1);
    expect(lost).toHaveBeenCalledWith(expect.any(LockLostError), stale);
    expect(await owner.release()).toBe(true);
  });

  it("does not delete the next holder's lock when release() is called again", async () => {
    const a = services.create();
    const b = services.create();
    const first = await a.acquire('twice');
    expect(await first.release()).toBe(true);
    const next = await b.acquire('twice');

    expect(await first.release()).toBe(true); // idempotent: reports the first release again
    await expectIntact('twice', next);
    await expect(first.extend()).rejects.toThrow(/released/);
    await expectIntact('twice', next);
    await next.release();
  });
});
