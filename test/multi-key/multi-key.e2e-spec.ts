/**
 * Multi-key locks on one Redis (one atomic script per try): all or nothing, duplicates, refused
 * input, waiting on the busy key, one signal for the set, extend/release of every key, the key
 * footprint and the re-entrancy rule.
 */
import {
  LockKeyError,
  LockLostError,
  LockNotAcquiredError,
  LockReentryError,
  RedisLockConfigError,
  type AcquireOptions,
} from 'nestjs-redis-lock';
import { onSharedRedis } from '../support/lock-services';
import { expectNoDeadlockBetweenOrders } from '../support/multi-key-cases';
import { now, sleep, waitFor } from '../support/time';

const { prefix, redis, services, keyOf } = onSharedRedis('multi-key');
const locks = services.create({ ttl: 3_000 });
const other = services.create({ ttl: 3_000 });

describe('acquire([...]) on one Redis', () => {
  it('holds every key with a fence of its own, in lock order, and releases them all', async () => {
    const lock = await locks.acquire(['m1:b', 'm1:a']);
    expect(lock.keys).toEqual(['m1:a', 'm1:b']);
    expect(lock.key).toBe('m1:a, m1:b');
    expect(lock.fence).toBe(lock.fences['m1:a']);
    expect(lock.fences['m1:b']).toBeGreaterThan(0);
    expect(await redis.exists(keyOf('m1:a'), keyOf('m1:b'))).toBe(2);
    expect(await lock.release()).toBe(true);
    expect(await redis.exists(keyOf('m1:a'), keyOf('m1:b'))).toBe(0);
  });

  it('gives each key a fence that grows with that key', async () => {
    const first = await locks.acquire(['m2:a', 'm2:b']);
    await first.release();
    const second = await locks.acquire(['m2:b', 'm2:a']);
    expect(second.fences['m2:a']).toBeGreaterThan(first.fences['m2:a']!);
    expect(second.fences['m2:b']).toBeGreaterThan(first.fences['m2:b']!);
    await second.release();
  });

  it('collapses duplicate keys into one', async () => {
    const lock = await locks.acquire(['m3:a', 'm3:b', 'm3:a']);
    expect(lock.keys).toEqual(['m3:a', 'm3:b']);
    await lock.release();
  });

  it('refuses an empty array, a bad key in it, and options for other kinds of lock', async () => {
    await expect(locks.acquire([])).rejects.toThrow(LockKeyError);
    await expect(locks.withLock([], () => 1)).rejects.toThrow(LockKeyError);
    await expect(locks.acquire(['m4:a', ''])).rejects.toThrow(LockKeyError);
    const semaphore = { permits: 2 } as AcquireOptions;
    await expect(locks.acquire(['m4:a', 'm4:b'], semaphore)).rejects.toThrow(RedisLockConfigError);
    await expect(locks.tryAcquire(['m4:a'], { mode: 'read' })).rejects.toThrow(
      RedisLockConfigError,
    );
    expect(await redis.exists(keyOf('m4:a'))).toBe(0);
  });

  it('counts a read lock on one of the keys as busy: takes none, and gets in once the reader left', async () => {
    const reader = await other.acquire('mr:b', { mode: 'read' });
    const busy = await locks.tryAcquire(['mr:a', 'mr:b']);
    expect(busy).toBeNull();
    // Neither key written: the one the reader holds is still its sorted set.
    expect(await redis.exists(keyOf('mr:a'))).toBe(0);
    expect(await redis.type(keyOf('mr:b'))).toBe('zset');
    const waiting = locks.acquire(['mr:a', 'mr:b'], { wait: 5_000 });
    await sleep(100);
    await reader.release();
    const lock = await waiting;
    expect(lock.keys).toEqual(['mr:a', 'mr:b']);
    await lock.release();
  });

  it('takes none of the keys when one is busy, and names that one', async () => {
    const held = await other.acquire('m5:b');
    expect(await locks.tryAcquire(['m5:a', 'm5:b', 'm5:c'])).toBeNull();
    expect(await redis.exists(keyOf('m5:a'), keyOf('m5:c'))).toBe(0);
    const error = await locks.acquire(['m5:c', 'm5:b', 'm5:a']).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockNotAcquiredError);
    const busy = error as LockNotAcquiredError;
    expect(busy.key).toBe('m5:b');
    expect(busy.keys).toEqual(['m5:a', 'm5:b', 'm5:c']);
    expect(busy.retryAfterMs).toBeGreaterThan(0);
    expect(busy.message).toMatch(/^Lock "m5:b" \(one of the 3 keys asked for together/);
    expect(await redis.exists(keyOf('m5:a'), keyOf('m5:c'))).toBe(0);
    await held.release();
  });

  it('waits on the busy key and is woken by its release, long before its lease ends', async () => {
    const held = await other.acquire('m6:b', { ttl: 20_000 });
    const started = now();
    const waiting = locks.acquire(['m6:a', 'm6:b'], { wait: 10_000 });
    await sleep(100);
    expect(await redis.exists(keyOf('m6:a'))).toBe(0); // waiting holds nothing
    await held.release();
    const lock = await waiting;
    expect(now() - started).toBeLessThan(5_000);
    await lock.release();
  });

  it('aborts the signal and releases the other keys when one key is lost', async () => {
    const lock = await locks.acquire(['m7:a', 'm7:b', 'm7:c'], { ttl: 300 });
    expect(await locks.forceRelease('m7:b')).toBe(true);
    await waitFor(() => lock.signal.aborted, 3_000);
    expect(lock.signal.reason).toBeInstanceOf(LockLostError);
    expect((lock.signal.reason as LockLostError).key).toBe('m7:b');
    expect(lock.isHeld).toBe(false);
    await waitFor(async () => (await redis.exists(keyOf('m7:a'), keyOf('m7:c'))) === 0, 3_000);
    expect(await lock.release()).toBe(false);
  });

  it('gives up a cancelled wait holding nothing', async () => {
    const held = await other.acquire('m13:b');
    const cancel = new AbortController();
    const waiting = locks.acquire(['m13:a', 'm13:b'], { wait: 10_000, signal: cancel.signal });
    await sleep(100);
    cancel.abort(new Error('client left'));
    await expect(waiting).rejects.toThrow('client left');
    expect(await redis.exists(keyOf('m13:a'))).toBe(0);
    await held.release();
  });

  it('frees the keys of a try that went out just before the call was cancelled', async () => {
    const cancel = new AbortController();
    // The engine's all-at-once commands (internal): the send, then the abort in its step.
    type Send = (...args: unknown[]) => Promise<unknown>;
    type Engine = { multi: { allAtOnce: { acquireAll: Send } } };
    const commands = (locks.engine as unknown as Engine).multi.allAtOnce;
    const send = commands.acquireAll;
    jest.spyOn(commands, 'acquireAll').mockImplementationOnce((...args: unknown[]) => {
      const sent = send(...args);
      cancel.abort(new Error('client left')); // in the same step as the send
      return sent;
    });
    // A lease far longer than the wait below: only a release can pass this test, not its end.
    const call = locks.acquire(['m15:a', 'm15:b'], { signal: cancel.signal, ttl: 30_000 });
    await expect(call).rejects.toThrow('client left');
    await waitFor(async () => (await redis.exists(keyOf('m15:a'), keyOf('m15:b'))) === 0, 2_000);
  });

  it('loses the set at maxHold, releasing every key', async () => {
    const lock = await locks.acquire(['m14:a', 'm14:b'], { maxHold: 200 });
    await waitFor(() => lock.signal.aborted, 3_000);
    expect((lock.signal.reason as LockLostError).reason).toBe('max-hold');
    await waitFor(async () => (await redis.exists(keyOf('m14:a'), keyOf('m14:b'))) === 0, 3_000);
  });

  it('aborts the set on shutdown (reason shutdown) and releases every key', async () => {
    const closing = services.create({ ttl: 3_000, shutdownGrace: 0 });
    const lock = await closing.acquire(['m15:a', 'm15:b']);
    await closing.close();
    expect((lock.signal.reason as LockLostError).reason).toBe('shutdown');
    expect(await redis.exists(keyOf('m15:a'), keyOf('m15:b'))).toBe(0);
  });

  it('loses nothing while renewal keeps every key alive past its ttl', async () => {
    const lock = await locks.acquire(['m8:a', 'm8:b'], { ttl: 300 });
    await sleep(900);
    expect(lock.isHeld).toBe(true);
    expect(await redis.exists(keyOf('m8:a'), keyOf('m8:b'))).toBe(2);
    expect(await lock.release()).toBe(true);
  });

  it('extends every key', async () => {
    const lock = await locks.acquire(['m9:a', 'm9:b'], { ttl: 2_000, renew: false });
    await lock.extend(30_000);
    for (const key of ['m9:a', 'm9:b'])
      expect(await redis.pttl(keyOf(key))).toBeGreaterThan(20_000);
    await lock.release();
  });

  it("emits one 'acquired' and one 'released' per key, and one 'busy' naming the busy key", async () => {
    const seen: string[] = [];
    const acquired = ({ key, fence }: { key: string; fence: number }) =>
      seen.push(`acquired ${key} ${fence > 0}`);
    const released = ({ key }: { key: string }) => seen.push(`released ${key}`);
    const busy = ({ key }: { key: string }) => seen.push(`busy ${key}`);
    locks.on('acquired', acquired).on('released', released).on('busy', busy);
    try {
      const lock = await locks.acquire(['m12:b', 'm12:a']);
      await lock.release();
      const held = await other.acquire('m12:b');
      await locks.tryAcquire(['m12:a', 'm12:b']);
      await held.release();
    } finally {
      locks.off('acquired', acquired).off('released', released).off('busy', busy);
    }
    expect(seen.sort()).toEqual([
      'acquired m12:a true',
      'acquired m12:b true',
      'busy m12:b',
      'released m12:a',
      'released m12:b',
    ]);
  });

  it('releases the whole set in one command, each key answered (control: one key per command)', async () => {
    // Scripts this test's connections send with the set's keys, as MONITOR sees them.
    const scriptsNaming = async (name: string, run: () => Promise<unknown>): Promise<number> => {
      const monitor = await redis.monitor();
      let scripts = 0;
      let fenced = false;
      monitor.on('monitor', (_time: string, args: string[], source: string) => {
        if (source === 'lua' || !args.some((arg) => arg.includes(`{${name}:`))) return;
        if (args[0]?.toLowerCase() === 'exists') fenced = true;
        else if (!fenced && /^eval/i.test(args[0] ?? '')) scripts++;
      });
      try {
        await run();
        // Everything the run sent came before this command, on the monitor's stream too.
        await redis.exists(keyOf(`${name}:a`));
        await waitFor(() => fenced, 2_000);
        return scripts;
      } finally {
        monitor.disconnect();
      }
    };
    // Warm: a script the server has not cached yet is sent twice (EVALSHA, then EVAL).
    await (await locks.acquire(['m16:warm', 'm16:warm2'])).release();
    await (await locks.acquire('m17:warm')).release();
    const set = await locks.acquire(['m16:a', 'm16:b', 'm16:c']);
    expect(await scriptsNaming('m16', () => set.release())).toBe(1);
    expect(await redis.exists(keyOf('m16:a'), keyOf('m16:b'), keyOf('m16:c'))).toBe(0);
    // The control: three locks of one key each, released together, send one script each.
    const singles = await Promise.all(['m17:a', 'm17:b', 'm17:c'].map((key) => locks.acquire(key)));
    expect(
      await scriptsNaming('m17', () => Promise.all(singles.map((lock) => lock.release()))),
    ).toBe(3);
  });

  it('writes nothing without a TTL', async () => {
    const lock = await locks.acquire(['m10:a', 'm10:b']);
    const names = await redis.keys(`${prefix}{m10:*`);
    expect(names.length).toBe(4); // lock (its value names the holder) and fence counter per key
    for (const name of names) expect(await redis.pttl(name)).toBeGreaterThan(0);
    await lock.release();
  });

  it('never deadlocks: [a, b] against [b, a], many times at once', async () => {
    await expectNoDeadlockBetweenOrders([locks, other], ['m11:a', 'm11:b'], {
      calls: 40,
      holdMs: 1,
      wait: 10_000,
    });
  });
});

describe('multi-key re-entrancy', () => {
  it('lets a nested call on all of the keys, or on some of them, join the held set', async () => {
    await locks.withLock(['r1:a', 'r1:b'], async (outer) => {
      await locks.withLock(['r1:b', 'r1:a'], (inner) => {
        expect(inner.fences).toEqual(outer.fences);
      });
      // A single-key call joins too; its handle is the set's.
      await locks.withLock('r1:a', (inner) => expect(inner.key).toBe('r1:a, r1:b'));
      await locks.withLock(['r1:b'], (inner) => expect(inner.fence).toBe(outer.fence));
    });
    expect(await redis.exists(keyOf('r1:a'), keyOf('r1:b'))).toBe(0);
  });

  it('refuses a nested call that holds only some of its keys (a deadlock in waiting)', async () => {
    await locks.withLock('r2:a', async () => {
      await expect(locks.withLock(['r2:a', 'r2:b'], () => 1)).rejects.toThrow(LockReentryError);
    });
    // The control: outside any lock the same call runs.
    await expect(locks.withLock(['r2:a', 'r2:b'], () => 1)).resolves.toBe(1);
  });
});
