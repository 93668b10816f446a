/**
 * Inspecting and freeing every kind of lock against real Redis, not only the mutex: a read lock's
 * readers (and the writer waiting for them), a semaphore's permits (plain and fair, a fair
 * hand-off included), `isLocked` for each kind, a forced release of readers and of permits that
 * their holders notice at their next renewal while a waiter gets in at once, and a listing that
 * shows every kind. Each case has a control: the same reading once nothing (or something else)
 * holds the key.
 */
import { Logger } from '@nestjs/common';
import { LockLostError, type LockHandle, type LockService } from 'nestjs-redis-lock';
import { RedisBackend } from '../lib/backends/redis.backend';
import { LockRedisKeys } from '../lib/keys/lock-keys';
import { lockServices, onSharedRedis } from './support/lock-services';
import { now, sleep, waitFor } from './support/time';
import { startCluster, type RedisClusterTopology } from './support/topologies';
import { uniquePrefix } from './support/unique-prefix';

const { prefix, redis, keyOf, services } = onSharedRedis('inspect-kinds');

/** A holder record as `inspect` reports it for a reader or a permit. */
const holderOf = (instanceId: string) => ({
  instanceId,
  since: expect.any(Number),
  ttlMs: expect.any(Number),
});

/** Every page of `locks.list()`. */
async function listAll(locks: LockService) {
  const listed = [];
  let cursor: string | undefined;
  do {
    const page = await locks.list({ cursor, count: 5 });
    listed.push(...page.locks);
    cursor = page.cursor;
  } while (cursor !== undefined);
  return listed;
}

/** Silences the warning a lost lock logs, for the duration of `body`. */
async function quietly<T>(body: () => Promise<T>): Promise<T> {
  const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  try {
    return await body();
  } finally {
    warn.mockRestore();
  }
}

describe('a read lock', () => {
  it('shows its readers (instance id, since, lease left) and the writer waiting for them', async () => {
    const operator = services.create({ instanceId: 'operator' });
    // Control: nothing there yet.
    expect(await operator.inspect('catalog')).toEqual({ held: false });
    expect(await operator.isLocked('catalog')).toBe(false);

    const before = Date.now();
    const a = await services.create({ instanceId: 'reader-a', ttl: 5_000 }).acquire('catalog', {
      mode: 'read',
    });
    const b = await services.create({ instanceId: 'reader-b', ttl: 5_000 }).acquire('catalog', {
      mode: 'read',
    });
    const writerService = services.create({ instanceId: 'writer' });
    const writing = writerService.acquire('catalog', { mode: 'write', wait: 10_000 });
    await waitFor(async () => (await redis.zcard(`${keyOf('catalog')}:writers-waiting`)) === 1);

    const info = await operator.inspect('catalog');
    expect(info).toEqual({
      held: true,
      kind: 'read',
      ttlMs: expect.any(Number),
      fence: a.fence,
      readers: {
        count: 2,
        holders: expect.arrayContaining([holderOf('reader-a'), holderOf('reader-b')]),
        writersWaiting: 1,
      },
    });
    for (const holder of info.readers!.holders) {
      expect(holder.ttlMs).toBeGreaterThan(3_000);
      expect(holder.ttlMs).toBeLessThanOrEqual(5_000);
      expect(holder.since).toBeGreaterThanOrEqual(before - 50);
      expect(holder.since).toBeLessThanOrEqual(Date.now() + 50);
    }
    expect(await operator.isLocked('catalog')).toBe(true);

    await a.release();
    expect((await operator.inspect('catalog')).readers).toMatchObject({
      count: 1,
      holders: [holderOf('reader-b')],
    });
    await b.release();
    // The last reader left: the writer got in, and the key reads as an exclusive lock now.
    const writer = await writing;
    expect(await operator.inspect('catalog')).toMatchObject({
      held: true,
      kind: 'exclusive',
      holder: { instanceId: 'writer' },
    });
    await writer.release();
    expect(await operator.inspect('catalog')).toEqual({ held: false });
    expect(await operator.isLocked('catalog')).toBe(false);
    // Released readers leave no holder record behind.
    expect(await redis.exists(`${keyOf('catalog')}:readers:holders`)).toBe(0);
  });
});

describe('a semaphore', () => {
  it('shows its limit, its permits held and who holds them', async () => {
    const operator = services.create({ instanceId: 'operator' });
    expect(await operator.inspect('exports')).toEqual({ held: false });
    const one = await services.create({ instanceId: 'exporter-1', ttl: 5_000 }).acquire('exports', {
      permits: 3,
    });
    const two = await services.create({ instanceId: 'exporter-2', ttl: 5_000 }).acquire('exports', {
      permits: 3,
    });
    expect(await operator.inspect('exports')).toEqual({
      held: true,
      kind: 'semaphore',
      ttlMs: expect.any(Number),
      fence: two.fence,
      semaphore: {
        permits: 3,
        count: 2,
        holders: expect.arrayContaining([holderOf('exporter-1'), holderOf('exporter-2')]),
        fence: two.fence,
      },
    });
    expect(await operator.isLocked('exports')).toBe(true);
    await one.release();
    await two.release();
    // Control: all permits given back.
    expect(await operator.inspect('exports')).toEqual({ held: false });
    expect(await operator.isLocked('exports')).toBe(false);
    expect(await redis.exists(`${keyOf('exports')}:permits:holders`)).toBe(0);
  });

  it('fair: shows the queued waiter, then the waiter as a holder once a release hands it a permit', async () => {
    const operator = services.create({ instanceId: 'operator', fair: true });
    const first = services.create({ instanceId: 'fair-1', fair: true, ttl: 5_000 });
    const held = [
      await first.acquire('render', { permits: 3 }),
      await first.acquire('render', { permits: 3 }),
    ];
    const info = await operator.inspect('render');
    expect(info).toMatchObject({
      held: true,
      kind: 'semaphore',
      semaphore: { permits: 3, count: 2, holders: [holderOf('fair-1'), holderOf('fair-1')] },
    });
    const third = await services
      .create({ instanceId: 'fair-2', fair: true, ttl: 5_000 })
      .acquire('render', { permits: 3 });
    const waiting = services
      .create({ instanceId: 'fair-waiter', fair: true, ttl: 5_000 })
      .acquire('render', { permits: 3, wait: 10_000 });
    await waitFor(async () => (await redis.zcard(`${keyOf('render')}:permits:queue`)) === 1);
    const full = await operator.inspect('render');
    expect(full.semaphore).toMatchObject({ count: 3 });
    expect(full.waiters).toEqual([{ instanceId: 'fair-waiter', since: expect.any(Number) }]);
    // Control: before the hand-off, the waiter holds nothing.
    expect(full.semaphore!.holders.map((h) => h.instanceId)).not.toContain('fair-waiter');

    await held[0]!.release(); // handed to the waiter in the release script itself
    const afterHandOff = await operator.inspect('render');
    expect(afterHandOff.semaphore!.count).toBe(3);
    expect(afterHandOff.semaphore!.holders.map((h) => h.instanceId).sort()).toEqual([
      'fair-1',
      'fair-2',
      'fair-waiter',
    ]);
    expect(afterHandOff.waiters).toBeUndefined();
    const handed = await waiting;
    await Promise.all([held[1]!, third, handed].map((lock) => lock.release()));
    expect(await operator.inspect('render')).toEqual({ held: false });
    expect(await redis.exists(`${keyOf('render')}:permits:holders`)).toBe(0);
    expect(await redis.exists(`${keyOf('render')}:permits:waiter-ids`)).toBe(0);
  });
});

describe('holder records of lapsed holders', () => {
  it('are dropped with the lapsed share or permit, also after a writer was refused by it', async () => {
    const crashed = services.create({ instanceId: 'crashed', ttl: 200 });
    const live = services.create({ instanceId: 'alive', ttl: 5_000 });
    const holders = (key: string, kind: 'readers' | 'permits') =>
      redis.hkeys(`${keyOf(key)}:${kind}:holders`);
    // A reader that stops renewing (as a crashed one) beside a live one: the next reader's grant
    // drops its lapsed share and its record together.
    await crashed.acquire('pruned-read', { mode: 'read', renew: false });
    const first = await live.acquire('pruned-read', { mode: 'read' });
    await sleep(300);
    expect(await holders('pruned-read', 'readers')).toHaveLength(2); // control: not yet dropped
    expect((await live.inspect('pruned-read')).readers?.holders).toEqual([holderOf('alive')]);
    const next = await live.acquire('pruned-read', { mode: 'read' });
    expect(await redis.hvals(`${keyOf('pruned-read')}:readers:holders`)).toEqual([
      expect.stringMatching(/ alive$/),
      expect.stringMatching(/ alive$/),
    ]);
    await Promise.all([first.release(), next.release()]);
    // A writer's try refused by the live reader reads the set and prunes nothing (it joins no
    // set, and leaves each kind's set to that kind's own rule): the next reader's grant drops the
    // lapsed share and its record.
    await crashed.acquire('writer-pruned', { mode: 'read', renew: false });
    const reading = await live.acquire('writer-pruned', { mode: 'read' });
    await sleep(300);
    expect(await live.tryAcquire('writer-pruned', { mode: 'write' })).toBeNull();
    expect(await redis.zcard(keyOf('writer-pruned'))).toBe(2); // control: left behind
    expect(await holders('writer-pruned', 'readers')).toHaveLength(2);
    const after = await live.acquire('writer-pruned', { mode: 'read' });
    expect(await redis.zcard(keyOf('writer-pruned'))).toBe(2);
    expect(await holders('writer-pruned', 'readers')).toHaveLength(2);
    expect((await live.inspect('writer-pruned')).readers?.holders).toEqual([
      holderOf('alive'),
      holderOf('alive'),
    ]);
    await Promise.all([reading.release(), after.release()]);
    // A permit that lapses, pruned by the next permit's grant.
    await crashed.acquire('pruned-permit', { permits: 2, renew: false });
    const kept = await live.acquire('pruned-permit', { permits: 2 });
    expect(await holders('pruned-permit', 'permits')).toHaveLength(2); // control: both there
    await sleep(300);
    const again = await live.acquire('pruned-permit', { permits: 2 });
    expect(await holders('pruned-permit', 'permits')).toHaveLength(2);
    expect((await live.inspect('pruned-permit')).semaphore?.holders).toEqual([
      holderOf('alive'),
      holderOf('alive'),
    ]);
    await Promise.all([kept.release(), again.release()]);
    expect(await redis.exists(`${keyOf('pruned-permit')}:permits:holders`)).toBe(0);
  });
});

describe('a forced release', () => {
  it('removes every reader at once: their signals abort at the next renewal and the waiting writer gets in', async () => {
    const ttl = 900;
    const lost = jest.fn();
    const readers = await Promise.all(
      ['r1', 'r2'].map((id) => {
        const service = services.create({ instanceId: id, ttl });
        service.on('lost', lost);
        return service.acquire('ledger', { mode: 'read' });
      }),
    );
    const writing = services
      .create({ instanceId: 'writer' })
      .acquire('ledger', { mode: 'write', wait: 10_000 })
      .then((lock) => ({ lock, at: now() }));
    // Control: the readers renew, so the writer stays out for longer than a lease.
    const outcome = await Promise.race([writing.then(() => 'in'), sleep(ttl * 1.2)]);
    expect(outcome).toBeUndefined();

    await quietly(async () => {
      const operator = services.create({ instanceId: 'operator' });
      const forcedAt = now();
      const evicted = await operator.evict('ledger');
      const removedReaders = {
        fence: readers[0]!.fence,
        count: 2,
        holders: expect.arrayContaining([holderOf('r1'), holderOf('r2')]),
      };
      expect(evicted).toEqual({
        kind: 'read',
        ...removedReaders,
        removed: { read: removedReaders },
      });
      const { lock: writer, at } = await writing;
      expect(at - forcedAt).toBeLessThan(ttl / 2);
      await waitFor(() => readers.every((reader) => reader.signal.aborted), ttl / 3 + 1_000, 5);
      for (const reader of readers) expect(reader.signal.reason).toBeInstanceOf(LockLostError);
      expect(lost).toHaveBeenCalledTimes(2);
      expect(await redis.exists(`${keyOf('ledger')}:readers:holders`)).toBe(0);
      await writer.release();
      expect(await operator.forceRelease('ledger')).toBe(false);
    });
  });

  it('removes every permit: the holders abort at their next renewal and a waiter gets a place at once', async () => {
    const ttl = 900;
    const lost = jest.fn();
    const holderService = services.create({ instanceId: 'slot-holder', ttl });
    holderService.on('lost', lost);
    const held: LockHandle[] = [
      await holderService.acquire('slots', { permits: 2 }),
      await holderService.acquire('slots', { permits: 2 }),
    ];
    const waiting = services
      .create({ instanceId: 'slot-waiter' })
      .acquire('slots', { permits: 2, wait: 10_000 })
      .then((lock) => ({ lock, at: now() }));
    const outcome = await Promise.race([waiting.then(() => 'in'), sleep(ttl * 1.2)]);
    expect(outcome).toBeUndefined(); // control: renewed permits keep the waiter out

    await quietly(async () => {
      const operator = services.create({ instanceId: 'operator' });
      const forcedAt = now();
      expect(await operator.forceRelease('slots')).toBe(true);
      const { lock: next, at } = await waiting;
      expect(at - forcedAt).toBeLessThan(ttl / 2);
      await waitFor(() => held.every((lock) => lock.signal.aborted), ttl / 3 + 1_000, 5);
      for (const lock of held) expect(lock.signal.reason).toBeInstanceOf(LockLostError);
      expect(lost).toHaveBeenCalledTimes(2);
      expect((await operator.inspect('slots')).semaphore).toMatchObject({
        count: 1,
        holders: [holderOf('slot-waiter')],
      });
      await next.release();
    });
  });

  it('evicts a fair semaphore and wakes its queued waiter', async () => {
    const holderService = services.create({ instanceId: 'fair-holder', fair: true, ttl: 900 });
    const held = await holderService.acquire('fair-slots', { permits: 1 });
    const waiting = services
      .create({ instanceId: 'fair-next', fair: true })
      .acquire('fair-slots', { permits: 1, wait: 10_000 });
    await waitFor(async () => (await redis.zcard(`${keyOf('fair-slots')}:permits:queue`)) === 1);
    await quietly(async () => {
      const evicted = await services.create().evict('fair-slots');
      const permit = { fence: held.fence, count: 1, holders: [holderOf('fair-holder')] };
      expect(evicted).toEqual({ kind: 'semaphore', ...permit, removed: { semaphore: permit } });
      const next = await waiting;
      expect((await services.create().inspect('fair-slots')).semaphore?.holders).toEqual([
        holderOf('fair-next'),
      ]);
      await waitFor(() => held.signal.aborted, 2_000, 5);
      await next.release();
    });
  });
});

describe('a key its permits hold (one name for every kind)', () => {
  it.each(['mutex', 'read'] as const)(
    'inspect() reads the semaphore alone, and a %s on the key is busy',
    async (other) => {
      const locks = services.create({ prefix: `${prefix}others-${other}:`, instanceId: 'o' });
      const permits = await Promise.all([1, 2, 3].map(() => locks.acquire('doc', { permits: 5 })));
      expect(await locks.tryAcquire('doc', other === 'read' ? { mode: 'read' } : {})).toBeNull();
      const info = await locks.inspect('doc');
      expect(info).toMatchObject({
        held: true,
        kind: 'semaphore',
        fence: permits[2]!.fence,
        semaphore: expect.objectContaining({ permits: 5, count: 3 }),
      });
      expect(info.others).toBeUndefined();
      await Promise.all(permits.map((held) => held.release()));
      // Control: once the permits are gone, the other kind gets the key.
      const alone = await locks.acquire('doc', other === 'read' ? { mode: 'read' } : {});
      expect((await locks.inspect('doc')).kind).toBe(other === 'read' ? 'read' : 'exclusive');
      await alone.release();
    },
  );

  it('lists it once, and a forced release removes the permits, their limit and records', async () => {
    const locks = services.create({ prefix: `${prefix}both:`, instanceId: 'both', ttl: 900 });
    const permits = await Promise.all(
      [1, 2, 3].map(() => locks.acquire('shared-name', { permits: 4 })),
    );
    const listed = await listAll(locks);
    expect(listed.map((lock) => [lock.key, lock.kind])).toEqual([['shared-name', 'semaphore']]);
    // One permit's grant wrote no record (as by an older version): counted, not listed.
    await redis.hdel(`${prefix}both:{shared-name}:permits:holders`, permits[0]!.token);
    await quietly(async () => {
      const permit = {
        fence: permits[2]!.fence,
        count: 3,
        holders: [holderOf('both'), holderOf('both')],
      };
      expect(await locks.evict('shared-name')).toEqual({
        kind: 'semaphore',
        ...permit,
        removed: { semaphore: permit },
      });
      const name = `${prefix}both:{shared-name}`;
      expect(await redis.exists(name, `${name}:permits:limit`, `${name}:permits:holders`)).toBe(0);
      expect(await locks.isLocked('shared-name')).toBe(false);
      expect(await listAll(locks)).toEqual([]);
      await waitFor(() => permits.every((held) => held.signal.aborted), 2_000, 10);
    });
  });
});

describe('isLocked', () => {
  it('answers as inspect().held for every kind, and false once only lapsed readers or permits are left', async () => {
    const crashed = services.create({ instanceId: 'crashed', ttl: 200 });
    const operator = services.create({ instanceId: 'operator' });
    const agrees = async (key: string, held: boolean) => {
      expect(await operator.isLocked(key)).toBe(held);
      expect((await operator.inspect(key)).held).toBe(held);
    };
    await crashed.acquire('lapsing-mutex', { renew: false });
    await crashed.acquire('lapsing-read', { mode: 'read', renew: false });
    await crashed.acquire('lapsing-permit', { permits: 2, renew: false });
    for (const key of ['lapsing-mutex', 'lapsing-read', 'lapsing-permit']) await agrees(key, true);
    // The sets outlive the lapsed entries, as when a longer lease on them was released since.
    await redis.pexpire(keyOf('lapsing-read'), 5_000);
    await redis.pexpire(keyOf('lapsing-permit'), 5_000);
    await redis.pexpire(`${keyOf('lapsing-permit')}:permits:limit`, 5_000); // it follows the set
    await sleep(300);
    // Control: the lapsed share and permit are still in their sets; only liveness says free.
    expect(await redis.zcard(keyOf('lapsing-read'))).toBe(1);
    expect(await redis.zcard(keyOf('lapsing-permit'))).toBe(1);
    for (const key of ['lapsing-mutex', 'lapsing-read', 'lapsing-permit']) await agrees(key, false);
  });
});

describe('isLocked cost', () => {
  it('is one script of 2 keys answering an integer, however many hold the key', async () => {
    const backend = new RedisBackend(
      { client: redis, owned: false },
      1_000,
      60_000,
      undefined,
      'x',
    );
    const permits = new LockRedisKeys(keyOf('crowded'), {
      type: 'semaphore',
      permits: 50,
    });
    try {
      for (let i = 0; i < 50; i++) await backend.acquire(permits, `t${i}`, 5_000);
      const evalsha = jest.spyOn(redis, 'evalsha');
      try {
        expect(await backend.isLocked(permits)).toBe(true);
        expect(evalsha).toHaveBeenCalledTimes(1);
        expect(evalsha.mock.calls[0]![1]).toBe(2); // numkeys (the inspect script: 12)
        expect(await evalsha.mock.results[0]!.value).toBe(1); // not one entry per holder
      } finally {
        evalsha.mockRestore();
      }
      expect((await backend.inspectRaw(permits)).semaphore?.permits).toHaveLength(100); // control
    } finally {
      await backend.close();
    }
  });
});

describe('list()', () => {
  it('lists every kind with its holder count; released ones drop out', async () => {
    const lister = services.create({ prefix: `${prefix}all:`, instanceId: 'lister' });
    const exclusive = await lister.acquire('mutex');
    const readers = [
      await lister.acquire('shared', { mode: 'read' }),
      await lister.acquire('shared', { mode: 'read' }),
    ];
    const permits = [
      await lister.acquire('pool', { permits: 4 }),
      await lister.acquire('pool', { permits: 4 }),
      await lister.acquire('pool', { permits: 4 }),
    ];
    const listed = await listAll(lister);
    const byKey = new Map(listed.map((lock) => [lock.key, lock]));
    expect([...byKey.keys()].sort()).toEqual(['mutex', 'pool', 'shared']);
    expect(byKey.get('mutex')).toMatchObject({
      kind: 'exclusive',
      holder: { instanceId: 'lister' },
    });
    expect(byKey.get('shared')).toMatchObject({ kind: 'read', readers: { count: 2 } });
    expect(byKey.get('pool')).toMatchObject({
      kind: 'semaphore',
      semaphore: { count: 3, permits: 4 },
    });
    await Promise.all([exclusive, ...readers, ...permits].map((lock) => lock.release()));
    // Control: nothing held, nothing listed.
    expect(await listAll(lister)).toEqual([]);
  });
});

describe('on a Cluster (3 primaries)', () => {
  const services = lockServices({ prefix: uniquePrefix('inspect-kinds-cluster') });
  let topology: RedisClusterTopology;

  beforeAll(async () => {
    topology = await startCluster({ primaries: 3, replicasPerPrimary: 0 });
  }, 60_000);

  afterAll(async () => {
    await services.closeAll();
    await topology?.stop();
  });

  it('lists readers and permits of every primary, and inspects and evicts each kind without CROSSSLOT', async () => {
    const cluster = { nodes: topology.startupNodes };
    const locks = services.create({ cluster, fair: true, instanceId: 'sharded', ttl: 900 });
    const names = Array.from({ length: 8 }, (_, i) => `shard:${i}`);
    const readers = await Promise.all(
      names.map((name) => locks.acquire(`r:${name}`, { mode: 'read' })),
    );
    const permits = await Promise.all(
      names.map((name) => locks.acquire(`p:${name}`, { permits: 2 })),
    );
    const listed = await listAll(services.create({ cluster }));
    const kinds = new Map(listed.map((lock) => [lock.key, lock.kind]));
    expect(kinds.size).toBe(16);
    for (const name of names) {
      expect([kinds.get(`r:${name}`), kinds.get(`p:${name}`)]).toEqual(['read', 'semaphore']);
    }
    expect((await locks.inspect('r:shard:3')).readers).toMatchObject({
      count: 1,
      holders: [holderOf('sharded')],
    });
    expect((await locks.inspect('p:shard:5')).semaphore).toMatchObject({
      permits: 2,
      count: 1,
      holders: [holderOf('sharded')],
    });
    await quietly(async () => {
      expect(await locks.evict('r:shard:3')).toMatchObject({ kind: 'read' });
      expect(await locks.evict('p:shard:5')).toMatchObject({ kind: 'semaphore' });
      expect([await locks.isLocked('r:shard:3'), await locks.isLocked('p:shard:5')]).toEqual([
        false,
        false,
      ]);
      await waitFor(() => readers[3]!.signal.aborted && permits[5]!.signal.aborted, 2_000, 10);
      await Promise.all([...readers, ...permits].map((lock) => lock.release()));
    });
    expect(await listAll(locks)).toEqual([]);
  });
});
