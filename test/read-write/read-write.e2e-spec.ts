/**
 * Read-write locks on the shared Redis: readers share a key, a writer has it alone (against
 * readers and writers), waiting writers hold back new readers (writer priority) and a writer
 * that gives up or dies stops doing so, a writer's release lets every waiting reader in, fences,
 * re-entrancy rules, bad options, fair mode, and the TTL of every key written.
 */
import {
  LockNotAcquiredError,
  LockUpgradeError,
  RedisLockConfigError,
  currentLock,
  type LockHandle,
} from 'nestjs-redis-lock';
import { acquireScript } from '../../lib/kinds/exclusive/acquire.script';
import { readAcquireScript } from '../../lib/kinds/read/read-acquire.script';
import { lockRedisKeys } from '../../lib/keys/lock-keys';
import { onSharedRedis } from '../support/lock-services';
import { now, sleep, waitFor } from '../support/time';

const { prefix, redis, services } = onSharedRedis('rw');
const locks = services.create({ ttl: 2_000 });
const other = services.create({ ttl: 2_000 });

/** The names of `key`'s lock (SCAN, never KEYS). */
async function namesOf(key: string): Promise<string[]> {
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, names] = await redis.scan(cursor, 'MATCH', `${prefix}{${key}}*`, 'COUNT', 1000);
    found.push(...names);
    cursor = next;
  } while (cursor !== '0');
  return found.sort();
}

/** Whether `promise` is still pending after `ms`. */
async function pendingAfter(promise: Promise<unknown>, ms: number): Promise<boolean> {
  const marker = Symbol('pending');
  const raced = await Promise.race([promise.catch(() => undefined), sleep(ms).then(() => marker)]);
  return raced === marker;
}

describe('sharing and exclusion', () => {
  it('lets several readers hold one key at once, each with its own token', async () => {
    const readers = await Promise.all(
      [locks, other, locks].map((s) => s.acquire('doc:1', { mode: 'read' })),
    );
    expect(readers.every((r) => r.isHeld)).toBe(true);
    expect(new Set(readers.map((r) => r.token)).size).toBe(3);
    expect(await redis.zcard(`${prefix}{doc:1}`)).toBe(3);
    await Promise.all(readers.map((r) => r.release()));
    expect(await redis.exists(`${prefix}{doc:1}`)).toBe(0);
  });

  it('refuses a writer while a reader holds, and a reader while a writer holds', async () => {
    const reader = await locks.acquire('doc:2', { mode: 'read' });
    expect(await other.tryAcquire('doc:2')).toBeNull();
    await expect(other.acquire('doc:2', { wait: 0 })).rejects.toBeInstanceOf(LockNotAcquiredError);
    await reader.release();
    const writer = await other.acquire('doc:2');
    expect(await locks.tryAcquire('doc:2', { mode: 'read' })).toBeNull();
    expect(await locks.tryAcquire('doc:2')).toBeNull();
    await writer.release();
    const again = await locks.acquire('doc:2', { mode: 'read' });
    await again.release();
  });

  it('wakes a waiting writer when the last reader leaves, not before', async () => {
    const r1 = await locks.acquire('doc:3', { mode: 'read' });
    const r2 = await other.acquire('doc:3', { mode: 'read' });
    const writer = other.acquire('doc:3', { wait: 10_000 });
    expect(await pendingAfter(writer, 150)).toBe(true);
    await r1.release();
    expect(await pendingAfter(writer, 150)).toBe(true);
    const released = now();
    await r2.release();
    const held = await writer;
    // Woken by the release message, well before its fallback (the readers' lease, 2 s).
    expect(now() - released).toBeLessThan(1_500);
    await held.release();
  });

  it('lets every waiting reader in (in two processes) when the writer releases', async () => {
    const writer = await locks.acquire('doc:4');
    const waiting = [locks, locks, other, other].map((s) =>
      s.acquire('doc:4', { mode: 'read', wait: 10_000 }),
    );
    expect(await pendingAfter(Promise.race(waiting), 150)).toBe(true);
    const released = now();
    await writer.release();
    const readers = await Promise.all(waiting);
    expect(now() - released).toBeLessThan(1_500);
    // All of them hold at the same time.
    expect(readers.every((r) => r.isHeld)).toBe(true);
    expect(await redis.zcard(`${prefix}{doc:4}`)).toBe(4);
    await Promise.all(readers.map((r) => r.release()));
  });

  it('keeps renewing a reader past its ttl (watchdog)', async () => {
    const short = services.create({ ttl: 300 });
    const reader = await short.acquire('doc:5', { mode: 'read' });
    await sleep(800);
    expect(reader.isHeld).toBe(true);
    expect(await other.tryAcquire('doc:5')).toBeNull();
    await reader.release();
  });
});

describe('writer priority', () => {
  it('holds back new readers while a writer waits, and lets them in once it is done', async () => {
    const r1 = await locks.acquire('doc:10', { mode: 'read' });
    const writer = other.acquire('doc:10', { wait: 10_000 });
    await waitFor(async () => (await redis.zcard(`${prefix}{doc:10}:writers-waiting`)) === 1);
    expect(await locks.tryAcquire('doc:10', { mode: 'read' })).toBeNull();
    const r2 = locks.acquire('doc:10', { mode: 'read', wait: 10_000 });
    await r1.release();
    const w = await writer;
    expect(await pendingAfter(r2, 100)).toBe(true);
    expect(await redis.exists(`${prefix}{doc:10}:writers-waiting`)).toBe(0);
    await w.release();
    await (await r2).release();
  });

  it('lets new readers past a writer that waits with writerPriority: false', async () => {
    const r1 = await locks.acquire('doc:11', { mode: 'read' });
    const writer = other.acquire('doc:11', { wait: 5_000, writerPriority: false });
    await sleep(100);
    const r2 = await locks.tryAcquire('doc:11', { mode: 'read' });
    expect(r2).not.toBeNull();
    await Promise.all([r1.release(), r2!.release()]);
    await (await writer).release();
  });

  it('frees the readers at once when the waiting writer gives up', async () => {
    const r1 = await locks.acquire('doc:12', { mode: 'read' });
    const writer = other.acquire('doc:12', { wait: 400 });
    await waitFor(async () => (await redis.zcard(`${prefix}{doc:12}:writers-waiting`)) === 1);
    const r2 = locks.acquire('doc:12', { mode: 'read', wait: 10_000 });
    await expect(writer).rejects.toBeInstanceOf(LockNotAcquiredError);
    const gaveUp = now();
    const held = await r2;
    // Woken by the writer's leave message, not by its entry lapsing (4 s from its last try).
    expect(now() - gaveUp).toBeLessThan(1_500);
    await Promise.all([r1.release(), held.release()]);
  });

  it('holds readers back no longer than its entry lives when a waiting writer dies', async () => {
    const keys = lockRedisKeys(prefix, 'doc:13');
    const r1 = await locks.acquire('doc:13', { mode: 'read' });
    // A writer's try, as a process that dies right after it would leave it: an entry of 1 s.
    const reply = await acquireScript.run(
      redis,
      [keys.lock, keys.fence, keys.writersWaiting],
      ['dead-writer-token', 2_000, 60_000, 'dead-writer', 1_000],
    );
    expect(Array.isArray(reply)).toBe(true);
    expect(await other.tryAcquire('doc:13', { mode: 'read' })).toBeNull();
    const started = now();
    const r2 = await other.acquire('doc:13', { mode: 'read', wait: 5_000 });
    const waited = now() - started;
    expect(waited).toBeGreaterThan(500);
    expect(waited).toBeLessThan(3_000);
    await Promise.all([r1.release(), r2.release()]);
  });
});

describe('re-sent commands', () => {
  it("grants a reader's re-sent acquire again, though a writer now waits", async () => {
    const keys = lockRedisKeys(prefix, 'doc:14');
    const grant = () =>
      readAcquireScript.run(
        redis,
        [
          keys.lock,
          keys.writersWaiting,
          keys.queue,
          keys.fence,
          keys.readerHolders,
          keys.permitLimit,
        ],
        ['reader-token', 2_000, 60_000, 'resending-reader'],
      );
    const fence = await grant();
    expect(fence).toBeGreaterThan(0);
    const writer = other.acquire('doc:14', { wait: 5_000 });
    await waitFor(async () => (await redis.zcard(keys.writersWaiting)) === 1);
    // ioredis re-sends a command whose reply a reset lost: the same grant, not a refusal.
    expect(await grant()).toBe(fence);
    expect(await locks.tryAcquire('doc:14', { mode: 'read' })).toBeNull();
    await redis.zrem(keys.lock, 'reader-token');
    await redis.publish(keys.channel, 'wake-all:reader-token');
    await (await writer).release();
  });
});

describe('fences', () => {
  it("gives a reader the fence of the last write; the next writer's is higher", async () => {
    const w1 = await locks.acquire('doc:20');
    await w1.release();
    const r = await locks.acquire('doc:20', { mode: 'read' });
    const r2 = await other.acquire('doc:20', { mode: 'read' });
    expect(r.fence).toBe(w1.fence);
    expect(r2.fence).toBe(w1.fence);
    await Promise.all([r.release(), r2.release()]);
    const w2 = await locks.acquire('doc:20');
    expect(w2.fence).toBeGreaterThan(r.fence);
    await w2.release();
  });

  it('gives a first reader a fence below every later write', async () => {
    const r = await locks.acquire('doc:21', { mode: 'read' });
    expect(r.fence).toBeGreaterThan(0);
    await r.release();
    const w = await locks.acquire('doc:21');
    expect(w.fence).toBeGreaterThan(r.fence);
    await w.release();
  });
});

describe('re-entrancy', () => {
  it('lets a read nested in a write of the same chain re-use the write', async () => {
    await locks.withLock('doc:30', async (write) => {
      await locks.withLock(
        'doc:30',
        async (read) => {
          expect(read.fence).toBe(write.fence);
          expect(currentLock()?.fence).toBe(write.fence);
        },
        { mode: 'read', wait: 0 },
      );
      expect(write.isHeld).toBe(true);
    });
  });

  it('lets a read nested in a read re-use it', async () => {
    await locks.withLock(
      'doc:31',
      async (outer) => {
        await locks.withLock('doc:31', (inner) => expect(inner.token).toBe(outer.token), {
          mode: 'read',
        });
      },
      { mode: 'read' },
    );
  });

  it('refuses a write nested in a read at once (LockUpgradeError), re-entrant or not', async () => {
    for (const reentrant of [true, false]) {
      await locks.withLock(
        'doc:32',
        async () => {
          const started = now();
          const nested = locks.withLock('doc:32', () => 'never', { wait: 5_000, reentrant });
          await expect(nested).rejects.toBeInstanceOf(LockUpgradeError);
          await expect(nested).rejects.toThrow(/mode 'write'.*outer call/);
          expect(now() - started).toBeLessThan(1_000);
        },
        { mode: 'read' },
      );
    }
  });
});

describe('acquire() and tryAcquire() nested in a read of the same key', () => {
  it('refuse a write at once (LockUpgradeError), one key or many, without holding readers back', async () => {
    await locks.withLock(
      'doc:33',
      async () => {
        const started = now();
        const calls: Promise<unknown>[] = [
          locks.acquire('doc:33', { wait: 5_000 }),
          locks.tryAcquire('doc:33'),
          locks.acquire(['doc:34', 'doc:33'], { wait: 5_000 }),
          locks.tryAcquire(['doc:33', 'doc:34']),
        ];
        for (const call of calls) {
          await expect(call).rejects.toBeInstanceOf(LockUpgradeError);
          await expect(call).rejects.toThrow(/mode 'write'.*outer call/);
        }
        expect(now() - started).toBeLessThan(1_000);
        // No writer entry was left waiting: another instance's reader still gets in.
        expect(await redis.exists(`${prefix}{doc:33}:writers-waiting`)).toBe(0);
        const reader = await other.tryAcquire('doc:33', { mode: 'read' });
        expect(reader).not.toBeNull();
        await reader!.release();
        // Control: another read is not refused. A permit on the key is, as another kind of lock
        // on the one name, with its own message.
        await (await locks.acquire('doc:33', { mode: 'read' })).release();
        const permit = locks.acquire('doc:33', { permits: 2 });
        await expect(permit).rejects.toBeInstanceOf(LockUpgradeError);
        await expect(permit).rejects.toThrow(/as a read lock.*as a permit of a semaphore/);
        expect(await locks.isLocked('doc:34')).toBe(false);
      },
      { mode: 'read' },
    );
    // Outside the read, the same write is granted.
    await (await locks.acquire('doc:33')).release();
  });
});

describe('options', () => {
  it('refuses bad values loudly', async () => {
    const bad = { mode: 'shared' } as unknown as { mode: 'read' };
    await expect(locks.acquire('doc:40', bad)).rejects.toBeInstanceOf(RedisLockConfigError);
    await expect(locks.acquire('doc:40', { mode: 'read', writerPriority: true })).rejects.toThrow(
      /applies to writers/,
    );
    // Module-wide it would keep every call (mutexes too) out of fair mode's queue; per call it may.
    expect(() => services.create({ fair: true, writerPriority: false })).toThrow(/module-wide/);
    const notBoolean = { writerPriority: 'yes' } as unknown as { writerPriority: boolean };
    await expect(locks.acquire('doc:40', notBoolean)).rejects.toBeInstanceOf(RedisLockConfigError);
    expect(() => services.create({ writerPriority: 'no' as unknown as boolean })).toThrow(
      RedisLockConfigError,
    );
  });
});

describe('fair mode', () => {
  it('keeps fair writers and readers apart, and readers behind a queued writer', async () => {
    const fair = services.create({ fair: true, ttl: 2_000 });
    const fair2 = services.create({ fair: true, ttl: 2_000 });
    const reader = await fair.acquire('doc:50', { mode: 'read' });
    expect(await fair2.tryAcquire('doc:50')).toBeNull();
    const writer = fair2.acquire('doc:50', { wait: 10_000 });
    await waitFor(async () => (await redis.zcard(`${prefix}{doc:50}:queue`)) === 1);
    expect(await fair.tryAcquire('doc:50', { mode: 'read' })).toBeNull();
    const later = fair.acquire('doc:50', { mode: 'read', wait: 10_000 });
    await reader.release();
    const w = await writer;
    expect(await pendingAfter(later, 100)).toBe(true);
    await w.release();
    await (await later).release();
  });

  it('lets new readers past a writer that waits with writerPriority: false: it takes no place in the queue', async () => {
    const fair = services.create({ fair: true, ttl: 2_000 });
    const fair2 = services.create({ fair: true, ttl: 2_000 });
    const reader = await fair.acquire('doc:51', { mode: 'read' });
    const writer = fair2.acquire('doc:51', { wait: 10_000, mode: 'write', writerPriority: false });
    await sleep(150); // its first tries: refused by the reader
    expect(await redis.exists(`${prefix}{doc:51}:queue`)).toBe(0);
    const r2 = await fair.tryAcquire('doc:51', { mode: 'read' });
    expect(r2).not.toBeNull();
    await Promise.all([reader.release(), r2!.release()]);
    await (await writer).release();
  });

  it('serves a writer with writerPriority: false after the queue: it holds back nobody (control: one that queues)', async () => {
    const fair = services.create({ fair: true, ttl: 2_000 });
    const fair2 = services.create({ fair: true, ttl: 2_000 });
    const fair3 = services.create({ fair: true, ttl: 2_000 });
    const order: string[] = [];
    const holder = await fair.acquire('doc:52');
    const yielding = fair2
      .withLock('doc:52', () => void order.push('no priority'), {
        wait: 10_000,
        writerPriority: false,
      })
      .then(() => order.push('no priority done'));
    await sleep(100); // refused once: waiting, not queued
    const queued = fair3.withLock('doc:52', () => void order.push('queued'), { wait: 10_000 });
    await waitFor(async () => (await redis.zcard(`${prefix}{doc:52}:queue`)) === 1);
    await holder.release();
    await Promise.all([yielding, queued]);
    expect(order.slice(0, 2)).toEqual(['queued', 'no priority']);
  });
});

describe('key footprint', () => {
  it('writes every key with a TTL: readers (the lock key), writers waiting, fence counter', async () => {
    const reader = await locks.acquire('doc:60', { mode: 'read' });
    const writer = other.acquire('doc:60', { wait: 10_000 });
    await waitFor(async () => (await redis.exists(`${prefix}{doc:60}:writers-waiting`)) === 1);
    const names = await namesOf('doc:60');
    expect(names).toEqual(
      ['', ':fence', ':readers:holders', ':writers-waiting'].map((s) => `${prefix}{doc:60}${s}`),
    );
    for (const name of names) expect(await redis.pttl(name)).toBeGreaterThan(0);
    await reader.release();
    const w: LockHandle = await writer;
    for (const name of await namesOf('doc:60')) {
      expect(await redis.pttl(name)).toBeGreaterThan(0);
    }
    await w.release();
  });
});
