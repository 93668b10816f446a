/**
 * The read kind's Lua scripts (a read-write lock's readers), run directly against a private
 * Redis (as redis-semaphore's `internal.test.ts` runs its own): each reply, each key written with
 * its value, type and TTL, each message published, and the rules between readers and writers, as
 * the scripts' TSDoc states them. The writer's side is the exclusive kind's scripts on the same
 * key.
 */
import { randomBytes } from 'node:crypto';
import { lockRedisKeys, type LockRedisKeys } from '../../lib/keys/lock-keys';
import { acquireScript } from '../../lib/kinds/exclusive/acquire.script';
import { fairAcquireScript } from '../../lib/kinds/exclusive/fair-acquire.script';
import { releaseScript } from '../../lib/kinds/exclusive/release.script';
import { readAcquireScript } from '../../lib/kinds/read/read-acquire.script';
import { readExtendScript } from '../../lib/kinds/read/read-extend.script';
import { readReleaseScript } from '../../lib/kinds/read/read-release.script';
import { writerLeaveScript } from '../../lib/kinds/read/writer-leave.script';
import { expectAllExpire, ScriptRedis } from '../support/script-redis';
import { startRedis, stopAllRedis } from '../support/redis-server';

const LEASE = 2_000;
const RETENTION = 10_000;
const INSTANCE = 'instance-a';

let redis: ScriptRedis;
let prefix: string;
let keys: LockRedisKeys;

const token = (): string => randomBytes(16).toString('hex');

const read = (own: string, lease = LEASE, id = INSTANCE) =>
  readAcquireScript.run(
    redis.client,
    [keys.lock, keys.writersWaiting, keys.queue, keys.fence, keys.readerHolders, keys.permitLimit],
    [own, lease, RETENTION, id],
  );

const extend = (own: string, lease: number) =>
  readExtendScript.run(
    redis.client,
    [keys.lock, keys.fence, keys.readerHolders],
    [own, lease, RETENTION],
  );

const leave = (own: string) =>
  readReleaseScript.run(
    redis.client,
    [keys.lock, keys.readerHolders],
    [own, 'PUBLISH', keys.channel],
  );

const write = (own: string) =>
  acquireScript.run(redis.client, [keys.lock, keys.fence], [own, LEASE, LEASE + RETENTION]);

/** A writer that will wait with writer priority (its call id `waitId`). */
const writeOrWait = (own: string, waitId: string, entryMs = 1_000) =>
  acquireScript.run(
    redis.client,
    [keys.lock, keys.fence, keys.writersWaiting],
    [own, LEASE, LEASE + RETENTION, waitId, entryMs],
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
  prefix = `kinds:read:${randomBytes(4).toString('hex')}:`;
  keys = lockRedisKeys(prefix, 'doc', { type: 'read' });
  await redis.listen(keys.channel);
  await redis.published(keys.channel);
});

describe('readAcquireScript', () => {
  it('grants a share scored with its lease end on Redis clock, and every key expires', async () => {
    const own = token();
    const before = await redis.micros();
    const fence = await read(own);
    const after = await redis.micros();

    // No counter yet: it starts from Redis' clock in µs, as a writer's first grant would.
    expect(fence).toBeGreaterThanOrEqual(before);
    expect(fence).toBeLessThanOrEqual(after);
    expect(await redis.client.get(keys.fence)).toBe(String(fence));
    expect(await redis.client.type(keys.lock)).toBe('zset');
    const score = Number(await redis.client.zscore(keys.lock, own));
    expect(score).toBeGreaterThanOrEqual(Math.floor(before / 1000) + LEASE);
    expect(score).toBeLessThanOrEqual(Math.floor(after / 1000) + LEASE);
    expect(await redis.client.hget(keys.readerHolders, own)).toMatch(
      new RegExp(`^\\d+ ${INSTANCE}$`),
    );
    const ttls = await expectAllExpire(redis, prefix);
    expect(Object.keys(ttls)).toEqual([keys.fence, keys.readerHolders, keys.lock].sort());
    expect(ttls[keys.lock]).toBeLessThanOrEqual(LEASE);
    expect(ttls[keys.fence]).toBeGreaterThan(LEASE);
    expect(ttls[keys.fence]).toBeLessThanOrEqual(LEASE + RETENTION);
  });

  it('shares one fence between readers: only writers count it up', async () => {
    const writer = token();
    const written = (await write(writer)) as number;
    await releaseScript.run(redis.client, [keys.lock], [writer, 'PUBLISH']);
    await redis.published(keys.channel);

    const first = token();
    const second = token();
    expect(await read(first)).toBe(written);
    expect(await read(second)).toBe(written);
    expect(await leave(first)).toBe(1);
    expect(await leave(second)).toBe(1);
    // The next write is fenced above every read granted before it.
    expect(await write(token())).toBe(written + 1);
  });

  it('answers a re-sent grant with its share kept, the record keeping its since', async () => {
    const own = token();
    const fence = await read(own);
    const record = await redis.client.hget(keys.readerHolders, own);
    expect(await read(own, LEASE, 'someone-else')).toBe(fence);
    expect(await redis.client.zcard(keys.lock)).toBe(1);
    expect(await redis.client.hget(keys.readerHolders, own)).toBe(record);
  });

  it('refuses readers while a writer holds, with its lease left, marking it so it publishes', async () => {
    const writer = token();
    await write(writer);
    const refused = await read(token());
    expect(refused).toBeLessThan(0);
    expect(-refused).toBeLessThanOrEqual(LEASE);
    expect(await redis.client.get(keys.lock)).toBe(`*${writer}`);
    expect(await releaseScript.run(redis.client, [keys.lock], [writer, 'PUBLISH'])).toBe(1);
    expect(await redis.published(keys.channel)).toEqual([writer]);
  });

  it('refuses new readers while a writer waits, until it leaves and wakes them', async () => {
    const holding = token();
    await read(holding);
    const entryMs = 900;
    const waiting = await writeOrWait(token(), 'call-1', entryMs);
    expect(Array.isArray(waiting)).toBe(true);

    const refused = await read(token());
    expect(refused).toBeLessThan(0);
    expect(-refused).toBeLessThanOrEqual(entryMs);
    // A reader already holding re-sends its grant: still its own.
    expect(await read(holding)).toBeGreaterThan(0);

    expect(
      await writerLeaveScript.run(
        redis.client,
        [keys.writersWaiting],
        ['call-1', 'PUBLISH', keys.channel],
      ),
    ).toBe(1);
    expect(await redis.published(keys.channel)).toEqual(['wake-all:call-1']);
    expect(await read(token())).toBeGreaterThan(0);
    // Control: leaving again finds no entry, and wakes nobody.
    expect(
      await writerLeaveScript.run(
        redis.client,
        [keys.writersWaiting],
        ['call-1', 'PUBLISH', keys.channel],
      ),
    ).toBe(0);
    expect(await redis.published(keys.channel)).toEqual([]);
  });

  it('lets readers in past a waiting writer whose entry lapsed', async () => {
    const now = await redis.millis();
    await redis.client.zadd(keys.writersWaiting, now - 1, 'crashed-writer');
    expect(await read(token())).toBeGreaterThan(0);
  });

  it("refuses readers while fair mode's queue of writers exists", async () => {
    await read(token());
    const writer = token();
    const queued = await fairAcquireScript.run(
      redis.client,
      [keys.lock, keys.fence, keys.queue, keys.waiters, keys.holder, keys.waiterIds],
      [writer, LEASE, '1', 1_000, RETENTION, INSTANCE],
    );
    expect(queued).toEqual([expect.any(Number), expect.any(Number)]);
    expect(await redis.client.zrange(keys.queue, 0, -1)).toEqual([writer]);

    const refused = await read(token());
    expect(refused).toBeLessThan(0);
    expect(-refused).toBeLessThanOrEqual(1_000);
  });

  it("drops crashed readers' lapsed shares and their records on the way", async () => {
    const now = await redis.millis();
    await redis.client.zadd(keys.lock, now - 10, 'crashed');
    await redis.client.hset(keys.readerHolders, 'crashed', `${now - 500} gone`);
    const own = token();
    await read(own);
    expect(await redis.client.zrange(keys.lock, 0, -1)).toEqual([own]);
    expect(await redis.client.hkeys(keys.readerHolders)).toEqual([own]);
  });
});

describe('readExtendScript', () => {
  it('renews our live share, the readers key and the counter', async () => {
    const own = token();
    await read(own, 300);
    expect(await extend(own, 5_000)).toBe(1);
    const ttls = await expectAllExpire(redis, prefix);
    expect(ttls[keys.lock]).toBeGreaterThan(300);
    expect(ttls[keys.readerHolders]).toBeGreaterThan(300);
    expect(ttls[keys.fence]).toBeGreaterThan(5_000);
    expect(Number(await redis.client.zscore(keys.lock, own))).toBeGreaterThan(
      (await redis.millis()) + 300,
    );
  });

  it('refuses a foreign token, and leaves the shares as they were (control)', async () => {
    const own = token();
    await read(own, 300);
    const score = await redis.client.zscore(keys.lock, own);
    expect(await extend(token(), 5_000)).toBe(0);
    expect(await redis.client.zscore(keys.lock, own)).toBe(score);
    expect(await redis.client.pttl(keys.lock)).toBeLessThanOrEqual(300);
  });

  it('drops a lapsed share with its record, and counts it lost', async () => {
    const own = token();
    await read(own);
    await read(token());
    await redis.client.zadd(keys.lock, 'XX', (await redis.millis()) - 1, own);
    expect(await extend(own, 5_000)).toBe(0);
    expect(await redis.client.zscore(keys.lock, own)).toBeNull();
    expect(await redis.client.hexists(keys.readerHolders, own)).toBe(0);
  });
});

describe('readReleaseScript', () => {
  it('wakes nobody while other readers hold, and everyone with the last share', async () => {
    const first = token();
    const last = token();
    await read(first);
    await read(last);

    expect(await leave(first)).toBe(1);
    expect(await redis.published(keys.channel)).toEqual([]);
    expect(await redis.client.hexists(keys.readerHolders, first)).toBe(0);

    expect(await leave(last)).toBe(1);
    expect(await redis.published(keys.channel)).toEqual([`wake-all:${last}`]);
    expect(await redis.ttls(prefix)).toEqual({ [keys.fence]: expect.any(Number) });
  });

  it('refuses a foreign token: the share stays, nobody is woken (control)', async () => {
    const own = token();
    await read(own);
    expect(await leave(token())).toBe(0);
    expect(await redis.client.zrange(keys.lock, 0, -1)).toEqual([own]);
    expect(await redis.published(keys.channel)).toEqual([]);
  });

  it('answers 0 for a share that had lapsed, and still removes it', async () => {
    const own = token();
    await read(own);
    await redis.client.zadd(keys.lock, 'XX', (await redis.millis()) - 1, own);
    expect(await leave(own)).toBe(0);
    expect(await redis.client.exists(keys.lock, keys.readerHolders)).toBe(0);
  });
});

describe('NOSCRIPT', () => {
  it('falls back to EVAL once the script cache is flushed, and caches the script again', async () => {
    await redis.client.script('FLUSH');
    // Control: the script really is gone from the cache.
    await expect(redis.client.evalsha(readAcquireScript.sha, 0)).rejects.toThrow(/NOSCRIPT/);
    expect(await read(token())).toBeGreaterThan(0);
    expect(await redis.client.script('EXISTS', readAcquireScript.sha)).toEqual([1]);
  });
});
