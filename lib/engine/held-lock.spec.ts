import type { Logger } from '@nestjs/common';
import { ReplyError } from 'ioredis';
import { MemoryLockBackend } from '../backends/memory.backend';
import { LockLostError, RedisLockConfigError, RedisLockError } from '../errors/errors';
import { LockRedisKeys, lockRedisKeys } from '../keys/lock-keys';
import { useClockSource } from '../util/clock';
import { HeldLock } from './held-lock';
import type { LockOperations } from './lock-operations';
import { Watchdog } from './watchdog';
import { fakeOperations, memoryCommands } from '../../test/support/memory-operations';

/** A command the test answers when it chooses. */
interface Pending<T> {
  readonly name: string;
  answer(value: T): void;
  fail(error: Error): void;
}

const silent = { warn: () => undefined } as unknown as Logger;

describe('HeldLock with the watchdog (fake backend, fake timers)', () => {
  let sent: Pending<unknown>[];
  let lost: LockLostError[];
  let skew: number;
  let watchdog: Watchdog;
  let operations: LockOperations<HeldLock>;

  function command<T>(name: string): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      sent.push({ name, answer: (v) => resolve(v as T), fail: reject });
    });
  }

  beforeEach(() => {
    jest.useFakeTimers();
    sent = [];
    lost = [];
    skew = 0;
    useClockSource({ monotonic: () => Date.now(), wall: () => Date.now() + skew });
    watchdog = new Watchdog((locks) => command(`renew ${locks.length}`), silent);
    operations = fakeOperations(
      { extend: (_lock, ms) => command(`extend ${ms}`), release: () => command('release') },
      watchdog,
      lost,
    );
  });

  afterEach(() => {
    watchdog.stop();
    jest.useRealTimers();
    useClockSource();
  });

  function hold(lease = 600, key = 'k'): HeldLock {
    const lock = new HeldLock({
      operations,
      key,
      redisKeys: new LockRedisKeys(`lock:{${key}}`),
      token: 'token',
      fence: 1,
      lease,
      startedAt: Date.now(),
      owner: {},
    });
    watchdog.add(lock);
    return lock;
  }

  const names = (): string[] => sent.map((pending) => pending.name);

  it('sends no renewal while an extension is in flight', async () => {
    const lock = hold(600);
    const extended = lock.extend(5_000);
    await jest.advanceTimersByTimeAsync(250); // the renewal was due at 200 ms
    expect(names()).toEqual(['extend 5000']);
    sent[0]!.answer(true);
    await extended;
    expect(lock.validUntil).toBe(5_000 + (Date.now() - 250));
    await jest.advanceTimersByTimeAsync(5_000 / 3);
    expect(names()).toEqual(['extend 5000', 'renew 1']); // renewing resumes, at the new length
  });

  it('sends an extension only after the renewal in flight was answered', async () => {
    const lock = hold(600);
    await jest.advanceTimersByTimeAsync(200);
    expect(names()).toEqual(['renew 1']);
    const extended = lock.extend(3_000);
    await jest.advanceTimersByTimeAsync(10);
    expect(names()).toEqual(['renew 1']);
    sent[0]!.answer([true]);
    await jest.advanceTimersByTimeAsync(0);
    expect(names()).toEqual(['renew 1', 'extend 3000']);
    sent[1]!.answer(true);
    await extended;
  });

  it('holds to the sooner deadline while an extension is in flight, and after it fails', async () => {
    const lock = hold(10_000);
    const start = Date.now();
    const extended = lock.extend(1_000);
    expect(lock.validUntil).toBe(start + 1_000); // it may have run already
    sent[0]!.fail(new Error('timed out'));
    await expect(extended).rejects.toThrow('timed out');
    expect(lock.validUntil).toBe(start + 1_000);
  });

  it('rejects extend() with LockLostError when the deadline passes while it is in flight', async () => {
    const lock = hold(600);
    const extended = lock.extend(5_000).catch((error: unknown) => error);
    await jest.advanceTimersByTimeAsync(601);
    expect(lost.map((error) => error.reason)).toEqual(['deadline']);
    sent[0]!.answer(true);
    expect(await extended).toBeInstanceOf(LockLostError);
  });

  it.each([1e-9, 1, 2, 2.5])(
    'rejects extend(%p), a lease with no validity after the drift margin, sending nothing',
    async (ms) => {
      // One Redis's margin below 100 ms: 2 ms, so the shortest usable lease is 3 ms.
      operations = fakeOperations(
        { extend: () => command('extend'), release: () => command('release') },
        watchdog,
        lost,
        2,
      );
      const lock = hold(600);
      await expect(lock.extend(ms)).rejects.toThrow(RedisLockConfigError);
      await expect(lock.extend(ms)).rejects.toThrow(/whole number of ms from 3 to 2147483647/);
      expect(lock.isHeld).toBe(true);
      expect(names()).toEqual([]);
    },
  );

  it('rejects extend(ms) beyond 2^31 - 1 ms without sending anything', async () => {
    const lock = hold(600);
    await expect(lock.extend(2 ** 31)).rejects.toThrow(RedisLockConfigError);
    await expect(lock.extend(0)).rejects.toThrow(RedisLockConfigError);
    expect(names()).toEqual([]);
  });

  it('stops renewing at maxHold: lost with reason max-hold, and released', async () => {
    const lock = hold(600);
    lock.holdFor(1_000);
    for (let t = 0; t < 1_000; t += 100) {
      await jest.advanceTimersByTimeAsync(100);
      const renewal = sent.find((pending) => pending.name.startsWith('renew'));
      if (renewal) {
        sent.splice(sent.indexOf(renewal), 1);
        renewal.answer([true]);
      }
    }
    expect(lost.map((error) => error.reason)).toEqual(['max-hold']);
    expect(lock.isHeld).toBe(false);
    expect(names()).toEqual(['release']);
  });

  it('renews each shard’s locks as a batch of their own: a shard that never answers loses only its own', async () => {
    watchdog.stop();
    // Keys 'a:…' on one node, 'b:…' on another; node 'a' is stuck and never answers.
    watchdog = new Watchdog(
      (locks) => command(`renew ${locks.map((lock) => lock.key).join(' ')}`),
      silent,
      (lock) => lock.key.split(':')[0],
    );
    const [a1, b1, a2, b2] = ['a:1', 'b:1', 'a:2', 'b:2'].map((key) => hold(600, key));
    for (let t = 0; t < 1_200; t += 50) {
      await jest.advanceTimersByTimeAsync(50);
      for (const renewal of sent.filter((pending) => pending.name.startsWith('renew b'))) {
        sent.splice(sent.indexOf(renewal), 1);
        renewal.answer([true, true]);
      }
    }
    expect(names()).toContain('renew a:1 a:2'); // the stuck node's batch, never answered
    expect([a1!.isHeld, a2!.isHeld, b1!.isHeld, b2!.isHeld]).toEqual([false, false, true, true]);
    expect(lost.map((error) => [error.key, error.reason])).toEqual([
      ['a:1', 'deadline'],
      ['a:2', 'deadline'],
    ]);
  });

  it('gives the lock up at a renewal the primary refuses for lack of replicas (no-replicas), and frees the key', async () => {
    const lock = hold(6_000);
    await jest.advanceTimersByTimeAsync(2_000);
    expect(names()).toEqual(['renew 1']);
    const refused = new ReplyError('NOREPLICAS Not enough good replicas to write.');
    // As the engine hands it on: wrapped, the reply as its cause.
    sent[0]!.fail(new Error('Redis renewal failed', { cause: refused }));
    await jest.advanceTimersByTimeAsync(0);
    expect(lost.map((error) => error.reason)).toEqual(['no-replicas']);
    expect(lock.signal.aborted).toBe(true);
    expect(names()).toEqual(['renew 1', 'release']);
  });

  it('retries a renewal that failed otherwise, until the deadline', async () => {
    hold(6_000);
    await jest.advanceTimersByTimeAsync(2_000);
    sent[0]!.fail(new ReplyError("READONLY You can't write against a read only replica."));
    await jest.advanceTimersByTimeAsync(0);
    expect(lost).toEqual([]);
  });

  it('takes a wall-clock jump off the deadline, and is lost (clock-jump) when it used up the lease', () => {
    const lock = hold(3_000);
    const before = lock.validUntil;
    jest.advanceTimersByTime(10);
    skew += 1_000;
    expect(lock.validUntil).toBe(before - 1_000);
    expect(lock.isHeld).toBe(true);
    skew += 5_000;
    expect(lock.isHeld).toBe(false);
    expect(lost.map((error) => error.reason)).toEqual(['clock-jump']);
  });

  it('renews at once when a wall-clock jump seen outside its tick (a read of isHeld) leaves little lease', async () => {
    const lock = hold(3_000);
    await jest.advanceTimersByTimeAsync(10);
    skew += 2_400; // 590 ms of the lease left; the renewal was due 1.4 s ago
    expect(lock.isHeld).toBe(true); // the jump is seen here, not by the watchdog
    await jest.advanceTimersByTimeAsync(50);
    expect(names()).toEqual(['renew 1']);
    sent[0]!.answer([true]);
    await jest.advanceTimersByTimeAsync(1_000); // past the deadline the jump left
    expect(lock.isHeld).toBe(true);
    expect(lost).toEqual([]);
  });

  it('takes a wall-clock jump off maxHold as well: a suspension past it ends the hold', () => {
    const lock = hold(10_000);
    lock.holdFor(2_000);
    jest.advanceTimersByTime(10);
    skew += 5_000; // the lease has 5 s left, maxHold ran out 3 s ago
    expect(lock.isHeld).toBe(false);
    expect(lost.map((error) => error.reason)).toEqual(['max-hold']);
    expect(names()).toEqual(['release']);
  });

  it('ends the hold at maxHold brought forward by a jump seen outside the watchdog’s tick', async () => {
    const lock = hold(10_000);
    lock.holdFor(3_000);
    await jest.advanceTimersByTimeAsync(10);
    skew += 2_000; // 990 ms of maxHold left
    expect(lock.isHeld).toBe(true);
    await jest.advanceTimersByTimeAsync(1_000);
    expect(lost.map((error) => error.reason)).toEqual(['max-hold']);
    expect(lock.isHeld).toBe(false);
  });
});

describe('HeldLock on the in-memory backend (fake timers)', () => {
  let backend: MemoryLockBackend;
  let lost: LockLostError[];
  let releases: number;
  let extensions: number;
  let watchdog: Watchdog;
  let operations: LockOperations<HeldLock>;
  const keys = lockRedisKeys('lock:', 'k');

  beforeEach(() => {
    jest.useFakeTimers();
    useClockSource({ monotonic: () => Date.now(), wall: () => Date.now() });
    backend = new MemoryLockBackend({ now: () => Date.now() });
    lost = [];
    releases = 0;
    extensions = 0;
    watchdog = new Watchdog((locks) => backend.renewMany(locks), silent);
    const memory = memoryCommands(backend);
    const counted = {
      extend: (lock: HeldLock, ms: number) => (extensions++, memory.extend(lock, ms)),
      release: (lock: HeldLock) => (releases++, memory.release(lock)),
    };
    operations = fakeOperations(counted, watchdog, lost, 10);
  });

  afterEach(() => {
    watchdog.stop();
    jest.useRealTimers();
    useClockSource();
  });

  async function hold(lease = 600, renews = true): Promise<HeldLock> {
    const startedAt = Date.now();
    const fence = await backend.acquire(keys, 'mine', lease);
    const lock = new HeldLock({
      operations,
      key: 'k',
      redisKeys: keys,
      token: 'mine',
      fence,
      lease,
      startedAt,
      owner: {},
    });
    lock.renews = renews;
    watchdog.add(lock);
    return lock;
  }

  it('counts its deadline from when the grant was sent, less the drift margin', async () => {
    const lock = await hold(600);
    expect(lock.validUntil).toBe(Date.now() + 600 - 10);
    expect(lock.fence).toBeGreaterThan(0);
  });

  it('releases once: true while ours, the same answer again, and one command only', async () => {
    const lock = await hold();
    expect(await lock.release()).toBe(true);
    expect(await lock.release()).toBe(true);
    expect(releases).toBe(1);
    expect(lock.isHeld).toBe(false);
    expect(lost).toEqual([]);
    expect(lock.signal.aborted).toBe(false);
    expect(backend.holder(keys)).toBeUndefined();
  });

  it('answers false to release() when the key was taken away, and reports the loss (not-owner)', async () => {
    const lock = await hold();
    await backend.forceRelease(keys);
    await backend.acquire(keys, 'someone else', 600);
    expect(await lock.release()).toBe(false);
    expect(lost.map((error) => error.reason)).toEqual(['not-owner']);
    expect(lock.signal.aborted).toBe(true);
    expect(lock.signal.reason).toBeInstanceOf(LockLostError);
    expect(backend.holder(keys)).toBe('someone else'); // untouched
  });

  it('answers false to a release after its local deadline, even when Redis still had the key', async () => {
    const lock = await hold(600, false);
    jest.setSystemTime(Date.now() + 595); // past the deadline (590), the key lives to 600
    expect(await lock.release()).toBe(false);
    expect(lost.map((error) => error.reason)).toEqual(['deadline']);
    expect(backend.holder(keys)).toBeUndefined();
  });

  it('aborts the signal at the deadline on reading it, before any timer fired', async () => {
    const lock = await hold(600, false);
    const signal = lock.signal;
    jest.setSystemTime(Date.now() + 590); // the timers have not run
    expect(lock.signal).toBe(signal);
    expect(signal.aborted).toBe(true);
    expect((signal.reason as LockLostError).reason).toBe('deadline');
  });

  it('frees the key when a renewing lock hits its deadline, but not one that does not renew', async () => {
    const renewing = await hold(600, true);
    watchdog.stop(); // no renewal comes: the deadline passes
    jest.setSystemTime(Date.now() + 590);
    expect(renewing.isHeld).toBe(false);
    await jest.advanceTimersByTimeAsync(0);
    expect(releases).toBe(1);
    expect(backend.holder(keys)).toBeUndefined();

    const other = lockRedisKeys('lock:', 'other');
    await backend.acquire(other, 'mine', 600);
    const passive = new HeldLock({
      operations,
      key: 'other',
      redisKeys: other,
      token: 'mine',
      fence: 1,
      lease: 600,
      startedAt: Date.now(),
      owner: {},
    });
    passive.renews = false;
    jest.setSystemTime(Date.now() + 590);
    expect(passive.isHeld).toBe(false);
    expect(releases).toBe(1);
  });

  it('rejects extend() with LockLostError (not-owner) when the key is not ours any more', async () => {
    const lock = await hold();
    await backend.forceRelease(keys);
    const error = await lock.extend(1_000).catch((thrown: unknown) => thrown);
    expect(error).toBeInstanceOf(LockLostError);
    expect((error as LockLostError).reason).toBe('not-owner');
    expect(lost).toHaveLength(1);
  });

  it('rejects extend() after release() without sending anything', async () => {
    const lock = await hold();
    await lock.release();
    await expect(lock.extend(1_000)).rejects.toThrow(RedisLockError);
    await expect(lock.extend(1_000)).rejects.not.toThrow(LockLostError);
    expect(extensions).toBe(0);
  });

  it('extends the lease in Redis and its deadline here, and the watchdog keeps the new length', async () => {
    const lock = await hold(600);
    await lock.extend(3_000);
    expect(backend.pttl(keys)).toBe(3_000);
    expect(lock.validUntil).toBe(Date.now() + 3_000 - 10);
    await jest.advanceTimersByTimeAsync(1_000);
    expect(backend.pttl(keys)).toBe(3_000); // renewed at a third of the new lease, to all of it
    await jest.advanceTimersByTimeAsync(10_000);
    expect(lock.isHeld).toBe(true);
  });

  it('reports a loss once, however it is seen again', async () => {
    const lock = await hold(600, false);
    jest.setSystemTime(Date.now() + 600);
    expect(lock.isHeld).toBe(false);
    expect(lock.expireIfDue()).toBe(true);
    lock.lose('not-owner');
    await lock.release();
    expect(lost.map((error) => error.reason)).toEqual(['deadline']);
  });
});
