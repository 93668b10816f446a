/**
 * The semaphore kind's Lua scripts, run directly against a private Redis (as redis-semaphore's
 * `internal.test.ts` runs its own): each reply (grants, busy, limit conflicts), each key written
 * with its value, type and TTL, and each message published, as the scripts' TSDoc states them,
 * in default and fair mode — and against the other kinds that may hold the lock's one name (a
 * mutex's string, readers' sorted set), which the permits' limit key tells apart from theirs.
 */
import { randomBytes } from 'node:crypto';
import { lockRedisKeys, type LockRedisKeys } from '../../lib/keys/lock-keys';
import { fairPermitAcquireScript } from '../../lib/kinds/semaphore/fair-permit-acquire.script';
import { fairPermitReleaseScript } from '../../lib/kinds/semaphore/fair-permit-release.script';
import { permitAcquireScript } from '../../lib/kinds/semaphore/permit-acquire.script';
import { permitExtendScript } from '../../lib/kinds/semaphore/permit-extend.script';
import { permitReleaseScript } from '../../lib/kinds/semaphore/permit-release.script';
import { acquireScript } from '../../lib/kinds/exclusive/acquire.script';
import { readAcquireScript } from '../../lib/kinds/read/read-acquire.script';
import { acquireAllScript } from '../../lib/lua/acquire-all.script';
import { expectAllExpire, ScriptRedis } from '../support/script-redis';
import { startRedis, stopAllRedis } from '../support/redis-server';
import { waitFor } from '../support/time';

const LEASE = 2_000;
const RETENTION = 10_000;
const INSTANCE = 'instance-a';

let redis: ScriptRedis;
let prefix: string;
let keys: LockRedisKeys;

const token = (): string => randomBytes(16).toString('hex');

const take = (own: string, permits = 2, lease = LEASE) =>
  permitAcquireScript.run(
    redis.client,
    [keys.lock, keys.permitLimit, keys.fence, keys.permitHolders],
    [own, lease, permits, RETENTION, INSTANCE],
  );

const extend = (own: string, lease: number) =>
  permitExtendScript.run(
    redis.client,
    [keys.lock, keys.permitLimit, keys.fence, keys.permitHolders],
    [own, lease, RETENTION],
  );

const giveBack = (own: string) =>
  permitReleaseScript.run(
    redis.client,
    [keys.lock, keys.permitLimit, keys.permitHolders],
    [own, 'PUBLISH', keys.channel],
  );

const fairKeys = () =>
  [
    keys.lock,
    keys.permitLimit,
    keys.fence,
    keys.queue,
    keys.waiters,
    keys.waiterIds,
    keys.permitHolders,
  ] as const;

const fairTake = (own: string, permits: number, queue: '1' | '0' = '1', entryMs = 1_000) =>
  fairPermitAcquireScript.run(redis.client, fairKeys(), [
    own,
    LEASE,
    permits,
    queue,
    entryMs,
    RETENTION,
    INSTANCE,
  ]);

const fairGiveBack = (own: string) =>
  fairPermitReleaseScript.run(redis.client, fairKeys(), [own, 'PUBLISH', RETENTION, keys.channel]);

/** Moves `own`'s lease end into the past, as if its holder had crashed a lease ago. */
const lapse = async (own: string): Promise<void> => {
  await redis.client.zadd(keys.lock, 'XX', (await redis.millis()) - 5, own);
};

beforeAll(async () => {
  const server = await startRedis();
  redis = await ScriptRedis.connect(server.url);
});

afterAll(async () => {
  redis.close();
  await stopAllRedis();
});

beforeEach(async () => {
  prefix = `kinds:semaphore:${randomBytes(4).toString('hex')}:`;
  keys = lockRedisKeys(prefix, 'pool', { type: 'semaphore', permits: 2 });
  await redis.listen(keys.channel);
  await redis.published(keys.channel);
});

describe('permitAcquireScript', () => {
  it('grants N places with fences counting up from Redis clock in µs, then answers busy', async () => {
    const before = await redis.micros();
    const first = (await take(token())) as number;
    const after = await redis.micros();
    const second = await take(token());

    expect(first).toBeGreaterThanOrEqual(before);
    expect(first).toBeLessThanOrEqual(after);
    expect(second).toBe(first + 1);
    const busy = (await take(token())) as number;
    expect(busy).toBeLessThan(0);
    expect(-busy).toBeLessThanOrEqual(LEASE);
    expect(await redis.client.zcard(keys.lock)).toBe(2);
  });

  it('writes the permits, the limit, the records and the counter, each with a TTL', async () => {
    const own = token();
    const fence = await take(own);

    expect(await redis.client.type(keys.lock)).toBe('zset');
    expect(await redis.client.get(keys.permitLimit)).toBe('2');
    expect(await redis.client.get(keys.fence)).toBe(String(fence));
    expect(await redis.client.hget(keys.permitHolders, own)).toMatch(
      new RegExp(`^\\d+ ${INSTANCE}$`),
    );
    const ttls = await expectAllExpire(redis, prefix);
    expect(Object.keys(ttls)).toEqual(
      [keys.lock, keys.permitLimit, keys.fence, keys.permitHolders].sort(),
    );
    expect(ttls[keys.lock]).toBeLessThanOrEqual(LEASE);
    expect(ttls[keys.permitLimit]).toBeLessThanOrEqual(LEASE);
    expect(ttls[keys.fence]).toBeGreaterThan(LEASE);
    expect(ttls[keys.fence]).toBeLessThanOrEqual(LEASE + RETENTION);
  });

  it('refuses another limit while holders hold, adding nobody (control: the same N is granted)', async () => {
    await take(token(), 2);
    expect(await take(token(), 3)).toEqual([2]);
    expect(await redis.client.zcard(keys.lock)).toBe(1);
    expect(await take(token(), 2)).toBeGreaterThan(0);
  });

  it('keeps a re-sent grant in its place with a fence of its own, even when full', async () => {
    const own = token();
    const fence = (await take(own)) as number;
    await take(token());
    expect(await take(own)).toBe(fence + 2);
    expect(await redis.client.zcard(keys.lock)).toBe(2);
  });

  it("frees a crashed holder's place once its lease ended, with its record", async () => {
    const crashed = token();
    await take(crashed);
    await take(token());
    await lapse(crashed);
    expect(await take(token())).toBeGreaterThan(0);
    expect(await redis.client.zscore(keys.lock, crashed)).toBeNull();
    expect(await redis.client.hexists(keys.permitHolders, crashed)).toBe(0);
  });
});

describe('permitExtendScript', () => {
  it('renews our live permit and every key of the semaphore', async () => {
    const own = token();
    await take(own, 2, 300);
    expect(await extend(own, 5_000)).toBe(1);
    const ttls = await expectAllExpire(redis, prefix);
    expect(ttls[keys.lock]).toBeGreaterThan(300);
    expect(ttls[keys.permitLimit]).toBeGreaterThan(300);
    expect(ttls[keys.permitHolders]).toBeGreaterThan(300);
    expect(ttls[keys.fence]).toBeGreaterThan(5_000);
  });

  it('refuses a foreign token and leaves the permits as they were (control)', async () => {
    await take(token(), 2, 300);
    expect(await extend(token(), 5_000)).toBe(0);
    expect(await redis.client.zcard(keys.lock)).toBe(1);
    expect(await redis.client.pttl(keys.lock)).toBeLessThanOrEqual(300);
  });

  it('drops a lapsed permit and counts it lost', async () => {
    const own = token();
    await take(own);
    await take(token());
    await lapse(own);
    expect(await extend(own, 5_000)).toBe(0);
    expect(await redis.client.zscore(keys.lock, own)).toBeNull();
    expect(await redis.client.hexists(keys.permitHolders, own)).toBe(0);
  });
});

describe('permitReleaseScript', () => {
  it('gives back our permit, publishes our token, and deletes the keys with the last one', async () => {
    const first = token();
    const last = token();
    await take(first);
    await take(last);

    expect(await giveBack(first)).toBe(1);
    expect(await redis.published(keys.channel)).toEqual([first]);
    expect(await redis.client.zrange(keys.lock, 0, -1)).toEqual([last]);
    expect(await giveBack(last)).toBe(1);
    expect(await redis.published(keys.channel)).toEqual([last]);
    // Only the fence counter outlives the semaphore, with its TTL.
    expect(Object.keys(await expectAllExpire(redis, prefix))).toEqual([keys.fence]);
  });

  it('refuses a foreign token: the permit stays, nothing is published (control)', async () => {
    const own = token();
    await take(own);
    expect(await giveBack(token())).toBe(0);
    expect(await redis.client.zrange(keys.lock, 0, -1)).toEqual([own]);
    expect(await redis.published(keys.channel)).toEqual([]);
  });

  it('answers 0 for a lapsed permit, publishing nothing', async () => {
    const own = token();
    await take(own);
    await take(token());
    await lapse(own);
    expect(await giveBack(own)).toBe(0);
    expect(await redis.published(keys.channel)).toEqual([]);
  });
});

describe('fair mode', () => {
  it('queues a waiter when the places are taken, with entries that expire', async () => {
    const fence = (await fairTake(token(), 1)) as number;
    const waiter = token();
    const busy = await fairTake(waiter, 1, '1', 800);

    expect(busy).toEqual([expect.any(Number), fence]);
    expect((busy as [number, number])[0]).toBeLessThanOrEqual(0);
    expect(await redis.client.zrange(keys.queue, 0, -1)).toEqual([waiter]);
    const entry = (await redis.client.hget(keys.waiters, waiter))!.split(' ').map(Number);
    expect(entry[0]).toBeGreaterThan(await redis.millis());
    expect(entry.slice(1)).toEqual([Math.min(LEASE, 800), 1]);
    expect(await redis.client.hget(keys.waiterIds, waiter)).toBe(INSTANCE);
    const ttls = await expectAllExpire(redis, prefix);
    for (const name of [keys.queue, keys.waiters, keys.waiterIds]) {
      expect(ttls[name]).toBeLessThanOrEqual(800);
    }
  });

  it('keeps a freed place for the queue: a newcomer is refused, the head is handed it', async () => {
    const holder = token();
    const waiter = token();
    const fence = (await fairTake(holder, 1)) as number;
    await fairTake(waiter, 1);

    expect(await fairGiveBack(holder)).toBe(1);
    expect(await redis.published(keys.channel)).toEqual([`grant:${waiter}:${fence + 1}`]);
    expect(await redis.client.zrange(keys.lock, 0, -1)).toEqual([waiter]);
    expect(await redis.client.hget(keys.permitHolders, waiter)).toMatch(
      new RegExp(`^\\d+ ${INSTANCE}$`),
    );
    expect(await redis.client.exists(keys.queue)).toBe(0);
    expect(await fairTake(token(), 1, '0')).toEqual([expect.any(Number), fence + 1]);
    await expectAllExpire(redis, prefix);
    // The waiter's next try finds the place its own, granted anew with a fence of its own.
    expect(await fairTake(waiter, 1)).toBe(fence + 2);
  });

  it('lets a newcomer in only behind the waiters keeping free places', async () => {
    const holder = token();
    await fairTake(holder, 2);
    await fairTake(token(), 2);
    const early = token();
    await fairTake(early, 2);
    // A place frees without a hand-off (the holder's lease ended): the early waiter keeps it.
    await lapse(holder);
    expect(await fairTake(token(), 2, '0')).toEqual([expect.any(Number), expect.any(Number)]);
    expect(await fairTake(early, 2)).toBeGreaterThan(0);
  });

  it('refuses another limit, from holders or from the first live waiter', async () => {
    const holder = token();
    await fairTake(holder, 1);
    await fairTake(token(), 1);
    expect(await fairTake(token(), 2)).toEqual([1]);

    // No holder left, but a live waiter asked for 1.
    await lapse(holder);
    expect(await fairTake(token(), 2)).toEqual([1]);
  });

  it('passes over a waiter whose entry lapsed: the release hands nothing on', async () => {
    const holder = token();
    const waiter = token();
    await fairTake(holder, 1);
    await fairTake(waiter, 1, '1', 50);
    const lapsed = (await redis.millis()) + 60;
    await waitFor(async () => (await redis.millis()) > lapsed, 1_000);

    expect(await fairGiveBack(holder)).toBe(1);
    expect(await redis.published(keys.channel)).toEqual([holder]);
    expect(await redis.client.exists(keys.lock, keys.permitLimit, keys.permitHolders)).toBe(0);
    expect(await redis.client.hexists(keys.waiters, waiter)).toBe(0);
  });

  it('lets a waiter leave the queue without a permit: 0, and nothing published (control)', async () => {
    const holder = token();
    const waiter = token();
    await fairTake(holder, 1);
    await fairTake(waiter, 1);

    expect(await fairGiveBack(waiter)).toBe(0);
    expect(await redis.client.zscore(keys.queue, waiter)).toBeNull();
    expect(await redis.client.zrange(keys.lock, 0, -1)).toEqual([holder]);
    expect(await redis.published(keys.channel)).toEqual([]);
  });
});

/** The lock's name as a mutex or writer takes it, and as a reader does (the same name). */
const mutexKeys = () => lockRedisKeys(prefix, 'pool');
const readKeys = () => lockRedisKeys(prefix, 'pool', { type: 'read' });
const takeMutex = (own: string, lease = LEASE) =>
  acquireScript.run(redis.client, [keys.lock, mutexKeys().fence], [own, lease, lease + RETENTION]);
const takeRead = (own: string, lease = LEASE) => {
  const k = readKeys();
  return readAcquireScript.run(
    redis.client,
    [k.lock, k.writersWaiting, k.queue, k.fence, k.readerHolders, k.permitLimit],
    [own, lease, RETENTION, INSTANCE],
  );
};
/** Everything under the lock's names but the fence counters, which outlive their holders. */
const held = async () =>
  Object.keys(await redis.ttls(prefix)).filter((name) => !name.endsWith(':fence'));

describe('another kind under the lock name', () => {
  it.each([
    ['a mutex (a string)', takeMutex],
    ['readers (a sorted set without the limit)', takeRead],
  ] as const)('answers busy while %s holds it, writing nothing of its own', async (_, other) => {
    expect(await other(token(), 1_500)).toBeGreaterThan(0);
    const before = await held();
    const busy = (await take(token())) as number;
    // -(ms until it may be free): the string's PTTL, or the readers' last lease left.
    expect(busy).toBeLessThanOrEqual(0);
    expect(-busy).toBeGreaterThan(1_000);
    expect(-busy).toBeLessThanOrEqual(1_500);
    const fair = (await fairTake(token(), 2)) as [number, number];
    expect(fair[0]).toBeLessThan(-1_000); // busy, and queued (its own keys)
    expect(await redis.client.zcard(keys.queue)).toBe(1);
    expect(await redis.client.exists(keys.permitLimit, keys.permitHolders)).toBe(0);
    expect((await held()).filter((name) => !name.includes(':permits:'))).toEqual(before);
  });

  it("marks a mutex's lease it was refused by, so that the mutex's release wakes it", async () => {
    const holder = token();
    await takeMutex(holder, 1_500);
    expect(await take(token())).toBeLessThan(0);
    expect(await redis.client.get(keys.lock)).toBe(`*${holder}`);
  });

  it('takes the name over from readers whose every lease has ended, deleting their set', async () => {
    const crashed = token();
    await takeRead(crashed, 100);
    await redis.client.pexpire(keys.lock, 5_000); // the set outlives them, as after a release
    await waitFor(
      async () =>
        (await redis.millis()) > Number(await redis.client.zscore(keys.lock, crashed)) + 1,
    );
    const own = token();
    expect(await take(own)).toBeGreaterThan(0);
    expect(await redis.client.zrange(keys.lock, 0, -1)).toEqual([own]);
    expect(await redis.client.exists(keys.permitLimit)).toBe(1);
  });

  it.each(['string', 'readers'] as const)(
    'answers "not ours" to release and extend on a %s, touching nothing, publishing nothing',
    async (kind) => {
      const own = token();
      if (kind === 'string') await takeMutex(token());
      else await takeRead(token());
      const before = await redis.ttls(prefix);
      expect(await giveBack(own)).toBe(0);
      expect(await extend(own, LEASE)).toBe(0);
      expect(await fairGiveBack(own)).toBe(0);
      expect(Object.keys(await redis.ttls(prefix))).toEqual(Object.keys(before));
      expect(await redis.client.type(keys.lock)).toBe(kind === 'string' ? 'string' : 'zset');
      expect(await redis.published(keys.channel)).toEqual([]);
    },
  );

  it('is busy for a mutex and for a reader while permits hold it (their limit beside them)', async () => {
    await take(token(), 2, 1_500);
    const ends = Number((await redis.client.zrange(keys.lock, -1, -1, 'WITHSCORES'))[1]);
    const mutexBusy = (await takeMutex(token())) as number;
    const readBusy = await takeRead(token());
    const allBusy = await acquireAllScript.run(
      redis.client,
      [keys.lock, mutexKeys().fence],
      [LEASE, RETENTION, token()],
    );
    const left = ends - (await redis.millis());
    for (const busy of [mutexBusy, readBusy, -allBusy[2]!]) {
      expect(busy).toBeLessThanOrEqual(0);
      expect(Math.abs(-busy - left)).toBeLessThanOrEqual(50); // the last permit's lease left
    }
    expect(allBusy.slice(0, 2)).toEqual([0, 1]);
    // The permits are read, never pruned by the readers' rule nor joined.
    expect(await redis.client.zcard(keys.lock)).toBe(1);
    expect(await redis.client.type(keys.lock)).toBe('zset');
    // The key's PTTL says the same as the busy replies: the sets' lifetimes follow their leases.
    expect(Math.abs((await redis.client.pttl(keys.lock)) - left)).toBeLessThanOrEqual(50);
  });
});

describe('the limit key: it tells permits from readers', () => {
  it('lives exactly as long as the permits: the same PEXPIRE on grant, extend and release', async () => {
    const [a, b] = [token(), token()];
    await take(a, 2, 5_000);
    await take(b, 2, 1_000);
    const same = async () => {
      const [set, limit] = await Promise.all([
        redis.client.pttl(keys.lock),
        redis.client.pttl(keys.permitLimit),
      ]);
      expect(set).toBeGreaterThan(0);
      expect(Math.abs(set - limit)).toBeLessThanOrEqual(5);
      return set;
    };
    expect(await same()).toBeGreaterThan(4_000);
    await extend(b, 8_000);
    expect(await same()).toBeGreaterThan(7_000);
    // The latest lease given back: the set and its limit now live as long as the one left.
    expect(await giveBack(b)).toBe(1);
    expect(await same()).toBeLessThanOrEqual(5_000);
    expect(await giveBack(a)).toBe(1);
    expect(await redis.client.exists(keys.lock, keys.permitLimit, keys.permitHolders)).toBe(0);
  });

  it('goes with the last permit in fair mode too, and a forced hand-off keeps it beside the set', async () => {
    const own = token();
    await fairTake(own, 1);
    const next = token();
    await fairTake(next, 1); // queued
    expect(await fairGiveBack(own)).toBe(1); // handed to next
    expect(await redis.client.exists(keys.lock, keys.permitLimit)).toBe(2);
    expect(await fairGiveBack(next)).toBe(1);
    expect(await redis.client.exists(keys.lock, keys.permitLimit)).toBe(0);
  });

  it('is deleted by a reader starting a new set, so permits never join readers', async () => {
    // A limit left over (its set went in another kind's script): the reader's grant deletes it.
    await redis.client.set(keys.permitLimit, '2', 'PX', 5_000);
    expect(await takeRead(token())).toBeGreaterThan(0);
    expect(await redis.client.exists(keys.permitLimit)).toBe(0);
    // Control: a permit now sees readers, not permits, and is busy.
    expect((await take(token())) as number).toBeLessThan(0);
    expect(await redis.client.zcard(keys.lock)).toBe(1);
  });
});

describe('NOSCRIPT', () => {
  it('falls back to EVAL once the script cache is flushed, and caches the script again', async () => {
    await redis.client.script('FLUSH');
    // Control: the script really is gone from the cache.
    await expect(redis.client.evalsha(permitAcquireScript.sha, 0)).rejects.toThrow(/NOSCRIPT/);
    expect(await take(token())).toBeGreaterThan(0);
    expect(await redis.client.script('EXISTS', permitAcquireScript.sha)).toEqual([1]);
  });
});
