/**
 * The exclusive kind's Lua scripts, run directly against a private Redis (as redis-semaphore's
 * `internal.test.ts` runs its own): each reply, each key written with its value, type and TTL,
 * and each message published, as the script's TSDoc states them. No engine, no adapter: a
 * change to a script's contract fails here first, by name.
 */
import { randomBytes } from 'node:crypto';
import { lockRedisKeys, type LockRedisKeys } from '../../lib/keys/lock-keys';
import { acquireScript } from '../../lib/kinds/exclusive/acquire.script';
import { acquireAllScript } from '../../lib/lua/acquire-all.script';
import { extendScript } from '../../lib/kinds/exclusive/extend.script';
import { fairAcquireScript } from '../../lib/kinds/exclusive/fair-acquire.script';
import {
  fairQuickAcquireScript,
  fairQuickReleaseScript,
} from '../../lib/kinds/exclusive/fair-quick.script';
import { fairReleaseScript } from '../../lib/kinds/exclusive/fair-release.script';
import { releaseAllScript } from '../../lib/kinds/exclusive/release-all.script';
import { releaseScript } from '../../lib/kinds/exclusive/release.script';
import { renewManyScript } from '../../lib/kinds/exclusive/renew-many.script';
import { readAcquireScript } from '../../lib/kinds/read/read-acquire.script';
import { commandsRunBy } from '../support/commandstats';
import { expectAllExpire, ScriptRedis } from '../support/script-redis';
import { startRedis, stopAllRedis } from '../support/redis-server';
import { waitFor } from '../support/time';

const LEASE = 2_000;
const RETENTION = 10_000;
const INSTANCE = 'instance-a';

let redis: ScriptRedis;
let prefix: string;
let keys: LockRedisKeys;

/** A token as the engine makes one: random hex, since (ms), instance id. */
const token = (id = INSTANCE): string => `${randomBytes(16).toString('hex')} ${Date.now()} ${id}`;

const acquire = (own: string, lease = LEASE) =>
  acquireScript.run(redis.client, [keys.lock, keys.fence], [own, lease, lease + RETENTION]);

const release = (own: string) => releaseScript.run(redis.client, [keys.lock], [own, 'PUBLISH']);

/** A reader's try on the same lock name (the readers hold the lock key itself). */
const readAcquire = (own: string, lease: number) => {
  const readers = lockRedisKeys(prefix, 'job', { type: 'read' });
  return readAcquireScript.run(
    redis.client,
    [
      readers.lock,
      readers.writersWaiting,
      readers.queue,
      readers.fence,
      readers.readerHolders,
      readers.permitLimit,
    ],
    [own, lease, RETENTION, INSTANCE],
  );
};

const fairKeys = () =>
  [keys.lock, keys.fence, keys.queue, keys.waiters, keys.holder, keys.waiterIds] as const;

const fairAcquire = (own: string, queue: '1' | '0', entryMs = 1_000, id = INSTANCE) =>
  fairAcquireScript.run(redis.client, fairKeys(), [own, LEASE, queue, entryMs, RETENTION, id]);

const fairRelease = (own: string) =>
  fairReleaseScript.run(
    redis.client,
    [keys.lock, keys.fence, keys.queue, keys.waiters, keys.holder, keys.waiterIds],
    [own, 'PUBLISH', RETENTION, keys.channel],
  );

beforeAll(async () => {
  const server = await startRedis();
  redis = await ScriptRedis.connect(server.url);
});

afterAll(async () => {
  redis.close();
  await stopAllRedis();
});

beforeEach(async () => {
  prefix = `kinds:exclusive:${randomBytes(4).toString('hex')}:`;
  keys = lockRedisKeys(prefix, 'job');
  await redis.listen(keys.channel);
  await redis.published(keys.channel);
});

describe('acquireScript', () => {
  it('grants a new counter its first fence from Redis clock in µs, and every key expires', async () => {
    const before = await redis.micros();
    const own = token();
    const fence = await acquire(own);
    const after = await redis.micros();

    expect(fence).toBeGreaterThanOrEqual(before);
    expect(fence).toBeLessThanOrEqual(after);
    expect(await redis.client.get(keys.lock)).toBe(own);
    expect(await redis.client.get(keys.fence)).toBe(String(fence));
    const ttls = await expectAllExpire(redis, prefix);
    // The two keys a grant writes: the lease with its PX, the counter with the lease + retention.
    expect(Object.keys(ttls)).toEqual([keys.lock, keys.fence].sort());
    expect(ttls[keys.lock]).toBeLessThanOrEqual(LEASE);
    expect(ttls[keys.fence]).toBeGreaterThan(LEASE);
    expect(ttls[keys.fence]).toBeLessThanOrEqual(LEASE + RETENTION);
  });

  it('starts a new counter above the fences of one that expired, whatever clock a token carries', async () => {
    const first = token();
    const fence = (await acquire(first)) as number;
    expect(await release(first)).toBe(1);
    await redis.client.del(keys.fence); // the counter ran out its retention
    // A client whose clock lags by an hour: its token's since must not seed the counter.
    const lagging = `${randomBytes(16).toString('hex')} ${Date.now() - 3_600_000} ${INSTANCE}`;
    expect(await acquire(lagging)).toBeGreaterThan(fence);
  });

  it('counts fences up while the counter lives', async () => {
    const first = token();
    const fence = (await acquire(first)) as number;
    expect(await release(first)).toBe(1);
    expect(await acquire(token())).toBe(fence + 1);
  });

  it('answers busy with the lease left, and marks the holder as waited for: lease and fence kept', async () => {
    const holder = token();
    const fence = (await acquire(holder)) as number;
    expect(await redis.client.get(keys.lock)).toBe(holder); // unmarked until a try is refused
    const busy = (await acquire(token('instance-b'))) as number;

    expect(busy).toBeLessThan(0);
    expect(-busy).toBeLessThanOrEqual(LEASE);
    expect(await redis.client.get(keys.lock)).toBe(`*${holder}`);
    expect(await redis.client.pttl(keys.lock)).toBeGreaterThan(0);
    expect(await redis.client.get(keys.fence)).toBe(String(fence));
    // Marked once: a second refused try leaves it as it is.
    await acquire(token('instance-c'));
    expect(await redis.client.get(keys.lock)).toBe(`*${holder}`);
  });

  it('answers a re-sent grant with the same fence, counting nothing up, marked or not', async () => {
    const own = token();
    const fence = await acquire(own);
    expect(await acquire(own)).toBe(fence);
    await acquire(token('instance-b')); // marks it
    expect(await acquire(own)).toBe(fence);
    expect(await redis.client.get(keys.fence)).toBe(String(fence));
  });

  it('refuses a writer while a live reader holds, and waits for the last one', async () => {
    await readAcquire(token(), 500);
    const busy = (await acquire(token())) as number;

    expect(busy).toBeLessThan(0);
    expect(-busy).toBeLessThanOrEqual(500);
    // The readers hold the lock key itself: still their sorted set, no token written over it.
    expect(await redis.client.type(keys.lock)).toBe('zset');
    expect(await redis.client.zcard(keys.lock)).toBe(1);
  });

  it('does not count a crashed reader whose share lapsed', async () => {
    const now = await redis.millis();
    await redis.client.zadd(keys.lock, now - 10, 'crashed');
    const own = token();
    expect(await acquire(own)).toBeGreaterThan(0);
    // The lapsed share went, and the writer's token took the key.
    expect(await redis.client.get(keys.lock)).toBe(own);
  });

  it('enters a waiting writer in the writers waiting, with a TTL, told to retry within a third', async () => {
    await readAcquire(token(), 1_500);
    const entryMs = 900;
    const args = [token(), LEASE, LEASE + RETENTION, 'call-1', entryMs] as const;
    const reply = await acquireScript.run(
      redis.client,
      [keys.lock, keys.fence, keys.writersWaiting],
      args,
    );

    expect(Array.isArray(reply)).toBe(true);
    const [retry] = reply as [number];
    expect(retry).toBeLessThanOrEqual(0);
    expect(-retry).toBeLessThanOrEqual(entryMs / 3);
    expect(await redis.client.zrange(keys.writersWaiting, 0, -1)).toEqual(['call-1']);
    const ttl = await redis.client.pttl(keys.writersWaiting);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(entryMs);
    await expectAllExpire(redis, prefix);
  });

  it('marks the lease of a writer granted out of the writers waiting: readers it held back wait', async () => {
    const reader = token();
    await readAcquire(reader, 1_500);
    const writer = token();
    const writerTry = () =>
      acquireScript.run(
        redis.client,
        [keys.lock, keys.fence, keys.writersWaiting],
        [writer, LEASE, LEASE + RETENTION, 'call-1', 900],
      );
    expect(Array.isArray(await writerTry())).toBe(true); // waits for the reader
    // A new reader is held back by the waiting writer, with nothing to mark: no lease yet.
    expect(await readAcquire(token(), 1_500)).toBeLessThan(0);
    await redis.client.zrem(keys.lock, reader); // the reader leaves
    expect(await writerTry()).toBeGreaterThan(0);

    expect(await redis.client.get(keys.lock)).toBe(`*${writer}`);
    expect(await redis.client.zcard(keys.writersWaiting)).toBe(0);
    expect(await release(writer)).toBe(1);
    expect(await redis.published(keys.channel)).toEqual([writer]);
  });

  it('leaves the lease of a writer that never waited unmarked (control)', async () => {
    const writer = token();
    const reply = await acquireScript.run(
      redis.client,
      [keys.lock, keys.fence, keys.writersWaiting],
      [writer, LEASE, LEASE + RETENTION, 'call-1', 900],
    );
    expect(reply).toBeGreaterThan(0);
    expect(await redis.client.get(keys.lock)).toBe(writer);
  });
});

describe('releaseScript', () => {
  it('deletes our own lock and publishes nothing when no try was refused meanwhile', async () => {
    const own = token();
    await acquire(own);
    expect(await release(own)).toBe(1);
    expect(await redis.client.exists(keys.lock)).toBe(0);
    expect(await redis.published(keys.channel)).toEqual([]);
  });

  it('publishes our token on <lock>:released once a refused try marked the lease', async () => {
    const own = token();
    await acquire(own);
    await acquire(token('instance-b')); // refused: marks it
    expect(await release(own)).toBe(1);
    expect(await redis.client.exists(keys.lock)).toBe(0);
    expect(await redis.published(keys.channel)).toEqual([own]);
  });

  it('refuses a foreign token: the lock stays, nothing is published (control)', async () => {
    const own = token();
    await acquire(own);
    await acquire(token('instance-c')); // marked: a foreign release must still not publish
    expect(await release(token('instance-b'))).toBe(0);
    expect(await redis.client.get(keys.lock)).toBe(`*${own}`);
    expect(await redis.published(keys.channel)).toEqual([]);
  });

  it('answers 0 for a lock that is gone', async () => {
    expect(await release(token())).toBe(0);
    expect(await redis.published(keys.channel)).toEqual([]);
  });

  it('answers 0, not WRONGTYPE, once readers hold the key our lease left, and leaves them', async () => {
    const own = token();
    await acquire(own);
    await redis.client.del(keys.lock); // our lease ended
    await readAcquireScript.run(
      redis.client,
      [
        keys.lock,
        keys.writersWaiting,
        keys.queue,
        keys.fence,
        keys.readerHolders,
        keys.permitLimit,
      ],
      [token(), LEASE, RETENTION, INSTANCE],
    );
    expect(await release(own)).toBe(0);
    expect(
      await extendScript.run(
        redis.client,
        [keys.lock, keys.fence, keys.holder],
        [own, LEASE, RETENTION],
      ),
    ).toBe(0);
    expect(await redis.client.zcard(keys.lock)).toBe(1);
    expect(await redis.published(keys.channel)).toEqual([]);
  });
});

describe('what an uncontended acquire and release run inside Lua', () => {
  it('is SET NX PX, INCR and PEXPIRE of the fence, then GET and DEL: nothing of other kinds', async () => {
    const warm = token();
    await acquire(warm); // the counter exists: the steady state of a key used before
    await release(warm);
    const ran = await commandsRunBy(redis.client, async () => {
      const own = token();
      await acquire(own);
      await release(own);
    });
    expect(ran).toEqual({ set: 1, incr: 1, pexpire: 1, get: 1, del: 1 });
  });

  it('is SET NX PX, INCR, TIME and a SET of the new counter, then GET and DEL, on a key never used', async () => {
    const ran = await commandsRunBy(redis.client, async () => {
      const own = token();
      await acquire(own);
      await release(own);
    });
    expect(ran).toEqual({ set: 2, incr: 1, time: 1, get: 1, del: 1 });
  });

  it('adds the PUBLISH only when a try was refused meanwhile (control)', async () => {
    const ran = await commandsRunBy(redis.client, async () => {
      const own = token();
      await acquire(own);
      await acquire(token('instance-b'));
      await release(own);
    });
    expect(ran.publish).toBe(1);
  });
});

describe('extendScript', () => {
  const extend = (own: string, lease: number) =>
    extendScript.run(redis.client, [keys.lock, keys.fence, keys.holder], [own, lease, RETENTION]);

  it('renews our lease and the counter behind it', async () => {
    const own = token();
    await acquire(own, 300);
    expect(await extend(own, 5_000)).toBe(1);
    const ttls = await expectAllExpire(redis, prefix);
    expect(ttls[keys.lock]).toBeGreaterThan(300);
    expect(ttls[keys.lock]).toBeLessThanOrEqual(5_000);
    expect(ttls[keys.fence]).toBeGreaterThan(5_000);
    expect(ttls[keys.fence]).toBeLessThanOrEqual(5_000 + RETENTION);
  });

  it('renews a lease a refused try marked: it is still ours', async () => {
    const own = token();
    await acquire(own, 300);
    await acquire(token('instance-b'));
    expect(await extend(own, 5_000)).toBe(1);
    expect(await redis.client.pttl(keys.lock)).toBeGreaterThan(300);
    expect(await redis.client.get(keys.lock)).toBe(`*${own}`);
  });

  it('refuses a foreign token and leaves the lease as it was (control)', async () => {
    await acquire(token(), 300);
    expect(await extend(token('instance-b'), 5_000)).toBe(0);
    expect(await redis.client.pttl(keys.lock)).toBeLessThanOrEqual(300);
  });
});

describe('renewManyScript', () => {
  it('renews each lock it still owns, and only those, a foreign type included', async () => {
    const ours = lockRedisKeys(prefix, 'ours');
    const theirs = lockRedisKeys(prefix, 'theirs');
    const foreign = lockRedisKeys(prefix, 'foreign-type');
    const own = token();
    await acquireScript.run(redis.client, [ours.lock, ours.fence], [own, 300, 300 + RETENTION]);
    // Refused there: ours is marked as waited for, and still ours.
    await acquireScript.run(
      redis.client,
      [ours.lock, ours.fence],
      [token('instance-b'), 300, 300 + RETENTION],
    );
    await acquireScript.run(
      redis.client,
      [theirs.lock, theirs.fence],
      [token('instance-b'), 300, 300 + RETENTION],
    );
    await redis.client.hset(foreign.lock, 'field', own);

    const reply = await renewManyScript.run(
      redis.client,
      [
        ours.lock,
        ours.fence,
        ours.holder,
        theirs.lock,
        theirs.fence,
        theirs.holder,
        foreign.lock,
        foreign.fence,
        foreign.holder,
      ],
      [RETENTION, own, 5_000, own, 5_000, own, 5_000],
    );

    expect(reply).toEqual([1, 0, 0]);
    expect(await redis.client.pttl(ours.lock)).toBeGreaterThan(300);
    expect(await redis.client.pttl(theirs.lock)).toBeLessThanOrEqual(300);
  });
});

describe('fair mode', () => {
  it('runs EXISTS of the queue, SET NX PX and the fence, then GET and DEL: nothing published, uncontended', async () => {
    const warm = token();
    await fairAcquire(warm, '1');
    await fairRelease(warm);
    const ran = await commandsRunBy(redis.client, async () => {
      const own = token();
      expect(typeof (await fairAcquire(own, '1'))).toBe('number');
      expect(await fairRelease(own)).toBe(1);
    });
    expect(ran).toEqual({ exists: 1, set: 1, incr: 1, pexpire: 1, get: 1, del: 1 });
    expect(await redis.published(keys.channel)).toEqual([]);
  });

  it('hands over a lease marked as waited for, to the last in line too: readers the queue held back wait', async () => {
    const [holder, second, third] = [token(), token('instance-b'), token('instance-c')];
    await fairAcquire(holder, '1');
    await fairAcquire(second, '1');
    await fairAcquire(third, '1');
    expect(await fairRelease(holder)).toBe(1);
    expect(await redis.client.get(keys.lock)).toBe(`*${second}`);
    // A reader comes while the queue exists: refused, and nothing marks it (no lease of its own).
    expect(await readAcquire(token(), LEASE)).toBeLessThan(0);
    expect(await fairRelease(second)).toBe(1);
    expect(await redis.client.get(keys.lock)).toBe(`*${third}`); // nobody behind it, still marked
    await redis.published(keys.channel); // the hand-offs so far
    expect(await fairRelease(third)).toBe(1);
    expect(await redis.published(keys.channel)).toEqual([third]); // the reader hears it
  });

  it('grants a free lock with no queue as default mode does: no holder record (the token names it)', async () => {
    const own = token();
    const fence = await fairAcquire(own, '1');

    expect(typeof fence).toBe('number');
    expect(await redis.client.get(keys.lock)).toBe(own);
    expect(await redis.client.exists(keys.holder)).toBe(0);
    await expectAllExpire(redis, prefix);
  });

  it('queues a busy waiter, answers a re-sent grant as ours, and hands off on release', async () => {
    const holder = token();
    const waiter = token('instance-b');
    const fence = (await fairAcquire(holder, '1')) as number;
    const entryMs = 1_000;

    const busy = await fairAcquire(waiter, '1', entryMs, 'instance-b');
    expect(busy).toEqual([expect.any(Number), fence]);
    expect((busy as [number, number])[0]).toBeLessThanOrEqual(0);
    expect(await redis.client.zrange(keys.queue, 0, -1)).toEqual([waiter]);
    const entry = (await redis.client.hget(keys.waiters, waiter))!.split(' ').map(Number);
    const [expiresAt, lease] = [entry[0]!, entry[1]!];
    expect(expiresAt).toBeGreaterThan(await redis.millis());
    expect(lease).toBe(Math.min(LEASE, entryMs));
    expect(await redis.client.hget(keys.waiterIds, waiter)).toBe('instance-b');
    await expectAllExpire(redis, prefix);

    const again = await fairAcquire(holder, '1');
    expect(again).toEqual([fence, expect.any(Number)]);

    // A newcomer that will not queue is refused too: the lock is held.
    expect(await fairAcquire(token('instance-c'), '0')).toEqual([expect.any(Number), fence]);

    expect(await fairRelease(holder)).toBe(1);
    expect(await redis.published(keys.channel)).toEqual([`grant:${waiter}:${fence + 1}`]);
    expect(await redis.client.get(keys.lock)).toBe(`*${waiter}`); // out of the queue: marked
    expect(await redis.client.pttl(keys.lock)).toBeLessThanOrEqual(lease);
    expect((await redis.client.get(keys.holder))!.endsWith(` ${waiter} instance-b`)).toBe(true);
    expect(await redis.client.zcard(keys.queue)).toBe(0);
    // The waiter's next try finds the lock already its own, with the fence it was handed.
    expect(await fairAcquire(waiter, '1', entryMs, 'instance-b')).toEqual([
      fence + 1,
      expect.any(Number),
    ]);
  });

  it('refuses a foreign release: no hand-off, nothing published (control)', async () => {
    const holder = token();
    await fairAcquire(holder, '1');
    await fairAcquire(token('instance-b'), '1'); // queued, and the holder marked as waited for
    expect(await fairRelease(token('instance-c'))).toBe(0);
    expect(await redis.client.get(keys.lock)).toBe(`*${holder}`);
    expect(await redis.published(keys.channel)).toEqual([]);
  });

  it('drops a waiter whose entry lapsed: the release hands nothing on', async () => {
    const holder = token();
    const waiter = token('instance-b');
    await fairAcquire(holder, '1');
    await fairAcquire(waiter, '1', 50);
    const lapsed = (await redis.millis()) + 60;
    await waitFor(async () => (await redis.millis()) > lapsed, 1_000);

    expect(await fairRelease(holder)).toBe(1);
    expect(await redis.published(keys.channel)).toEqual([holder]);
    expect(await redis.client.exists(keys.lock)).toBe(0);
    expect(await redis.client.hexists(keys.waiters, waiter)).toBe(0);
  });

  it('publishes wake-all when the last waiter leaves a lock nobody holds', async () => {
    const waiter = token('instance-b');
    await fairAcquire(token(), '1');
    await fairAcquire(waiter, '1', 5_000);
    // The holder's lease ran out (as after a crash).
    await redis.client.del(keys.lock);

    expect(await fairRelease(waiter)).toBe(0);
    expect(await redis.published(keys.channel)).toEqual([`wake-all:${waiter}`]);
    expect(await redis.client.exists(keys.queue)).toBe(0);
  });
});

describe('NOSCRIPT', () => {
  it('falls back to EVAL once the script cache is flushed, and caches the script again', async () => {
    await redis.client.script('FLUSH');
    // Control: the script really is gone from the cache.
    await expect(redis.client.evalsha(acquireScript.sha, 0)).rejects.toThrow(/NOSCRIPT/);
    expect(await acquire(token())).toBeGreaterThan(0);
    expect(await redis.client.script('EXISTS', acquireScript.sha)).toEqual([1]);
  });
});

describe('acquireAllScript (several exclusive locks at once)', () => {
  const pair = () => [lockRedisKeys(prefix, 'pair:a'), lockRedisKeys(prefix, 'pair:b')] as const;
  const acquireAll = (tokens: readonly [string, string]) => {
    const [a, b] = pair();
    return acquireAllScript.run(
      redis.client,
      [a.lock, a.fence, b.lock, b.fence],
      [LEASE, RETENTION, ...tokens],
    );
  };

  it('takes two free keys with their SETs and fence counters alone: no look at who holds them', async () => {
    await acquireAll([token(), token()]); // the counters exist: the steady state
    await Promise.all(pair().map((k) => redis.client.del(k.lock)));
    const ran = await commandsRunBy(redis.client, async () => {
      expect((await acquireAll([token(), token()]))[0]).toBe(1);
    });
    expect(ran).toEqual({ set: 2, incr: 2, pexpire: 2 });
  });

  it("starts two new fence counters from one reading of Redis' clock", async () => {
    const ran = await commandsRunBy(redis.client, async () => {
      const reply = await acquireAll([token(), token()]);
      expect(reply[0]).toBe(1);
      expect(reply[1]).toBe(reply[2]); // one reading, in µs: each key's first fence
    });
    expect(ran).toEqual({ set: 4, incr: 2, time: 1 });
  });

  it('gives back what it took when a later key is busy, and marks that holder (control: both free)', async () => {
    const [a, b] = pair();
    const holder = token('instance-b');
    await acquireScript.run(redis.client, [b.lock, b.fence], [holder, LEASE, LEASE + RETENTION]);
    const reply = await acquireAll([token(), token()]);
    expect(reply.slice(0, 2)).toEqual([0, 2]); // the second key (1-based) is busy
    expect(reply[2]).toBeGreaterThan(0);
    expect(await redis.client.exists(a.lock)).toBe(0);
    expect(await redis.client.get(b.lock)).toBe(`*${holder}`);
    await redis.client.del(b.lock);
    expect((await acquireAll([token(), token()]))[0]).toBe(1);
  });
});

describe('releaseAllScript (a multi-key set, in one step)', () => {
  const trio = () => ['set:a', 'set:b', 'set:c'].map((name) => lockRedisKeys(prefix, name));
  const take = (k: LockRedisKeys, own: string) =>
    acquireScript.run(redis.client, [k.lock, k.fence], [own, LEASE, LEASE + RETENTION]);
  const releaseAll = (locks: readonly LockRedisKeys[], tokens: readonly string[]) =>
    releaseAllScript.run(
      redis.client,
      locks.map((k) => k.lock),
      ['PUBLISH', ...tokens],
    );

  it('deletes every key still ours with one GET each and one DEL for all, publishing nothing', async () => {
    const [a, b] = trio();
    const tokens = [token(), token()];
    await take(a!, tokens[0]!);
    await take(b!, tokens[1]!);
    const ran = await commandsRunBy(redis.client, async () => {
      expect(await releaseAll([a!, b!], tokens)).toEqual([1, 1]);
    });
    expect(ran).toEqual({ get: 2, del: 1 });
    expect(await redis.client.exists(a!.lock, b!.lock)).toBe(0);
  });

  it("publishes on a marked key's own channel only, and answers 0 for a key not ours: it stays", async () => {
    const [a, b, c] = trio();
    await redis.listen(b!.channel);
    const tokens = [token(), token(), token()];
    await take(a!, tokens[0]!);
    await take(b!, tokens[1]!);
    await take(b!, token('instance-b')); // refused: marks b
    const foreign = token('instance-c');
    await take(c!, foreign); // c is someone else's
    expect(await releaseAll([a!, b!, c!], tokens)).toEqual([1, 1, 0]);
    expect(await redis.client.exists(a!.lock, b!.lock)).toBe(0);
    expect(await redis.client.get(c!.lock)).toBe(foreign);
    expect(await redis.published(b!.channel)).toEqual([tokens[1]]);
  });

  it('answers 0, not WRONGTYPE, for a key readers took after our lease ended', async () => {
    const [a] = trio();
    const own = token();
    await redis.client.zadd(a!.lock, Date.now() + LEASE, 'reader');
    expect(await releaseAll([a!], [own])).toEqual([0]);
    expect(await redis.client.zcard(a!.lock)).toBe(1);
  });
});

describe("fair mode's uncontended path (fairQuickAcquireScript, fairQuickReleaseScript)", () => {
  const quickAcquire = (own: string) =>
    fairQuickAcquireScript.run(
      redis.client,
      [keys.lock, keys.fence, keys.queue],
      [own, LEASE, LEASE + RETENTION],
    );
  const quickRelease = (own: string) =>
    fairQuickReleaseScript.run(redis.client, [keys.lock], [own]);

  it("grants a free lock nobody queues for with default mode's commands and keys: unmarked, no record", async () => {
    const warm = token();
    await quickAcquire(warm); // the counter exists: the steady state of a key used before
    await quickRelease(warm);
    const own = token();
    expect(await quickAcquire(own)).toBeGreaterThan(0);
    expect(await redis.client.get(keys.lock)).toBe(own);
    await quickRelease(own);
    const ran = await commandsRunBy(redis.client, async () => {
      const next = token();
      expect(await quickAcquire(next)).toBeGreaterThan(0);
      expect(await quickRelease(next)).toBe(1);
    });
    expect(ran).toEqual({ exists: 1, set: 1, incr: 1, pexpire: 1, get: 1, del: 1 });
    expect(await redis.client.exists(keys.lock, keys.holder)).toBe(0);
    expect(await redis.published(keys.channel)).toEqual([]);
  });

  it('answers 0 and writes nothing while a queue exists or the lock is held: the full try decides', async () => {
    const holder = token();
    await fairAcquire(holder, '1');
    const waiter = token('instance-b');
    expect(await quickAcquire(waiter)).toBe(0);
    expect(await redis.client.get(keys.lock)).toBe(holder); // not marked: the full try marks it
    await fairAcquire(waiter, '1'); // queued (and the lease marked)
    expect(await fairRelease(holder)).toBe(1); // handed to the waiter
    expect(await fairRelease(waiter)).toBe(1);
    await fairAcquire(token('instance-c'), '1'); // a new holder, and a queue behind it:
    await fairAcquire(token('instance-d'), '1');
    await redis.client.del(keys.lock); // the lock is free, but reserved for the head of the queue
    expect(await quickAcquire(token())).toBe(0);
    expect(await redis.client.exists(keys.lock)).toBe(0);
  });

  it('leaves a lease a refused try marked to the full release, which hands it over (control: unmarked)', async () => {
    const own = token();
    expect(await quickAcquire(own)).toBeGreaterThan(0);
    const waiter = token('instance-b');
    await fairAcquire(waiter, '1'); // refused: marks our lease and queues
    expect(await quickRelease(own)).toBe(0);
    expect(await redis.client.get(keys.lock)).toBe(`*${own}`);
    expect(await fairRelease(own)).toBe(1);
    expect(await redis.client.get(keys.lock)).toBe(`*${waiter}`);
  });

  it("answers 0, not WRONGTYPE, under readers, and for another's lease", async () => {
    const own = token();
    expect(await quickAcquire(own)).toBeGreaterThan(0);
    expect(await quickRelease(token('instance-b'))).toBe(0);
    expect(await redis.client.get(keys.lock)).toBe(own);
    await redis.client.del(keys.lock);
    expect(await readAcquire(token(), LEASE)).toBeGreaterThan(0);
    expect(await quickRelease(own)).toBe(0);
    expect(await redis.client.zcard(keys.lock)).toBe(1);
  });
});
