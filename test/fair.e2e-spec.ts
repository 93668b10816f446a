/**
 * Fair mode (`fair: true`): waiters queue in Redis and a release hands the lock straight to the
 * longest-waiting live one. Runs on a private redis-server, so the queue can be inspected and the
 * subscriber connection killed.
 */
import Redis from 'ioredis';
import {
  LockNotAcquiredError,
  LockService,
  RedisLockConfigError,
  type LockHandle,
} from 'nestjs-redis-lock';
import { lockRedisKeys } from '../lib/keys/lock-keys';
import { fairAcquireScript } from '../lib/kinds/exclusive/fair-acquire.script';
import { fairQuickAcquireScript } from '../lib/kinds/exclusive/fair-quick.script';
import { fairReleaseScript } from '../lib/kinds/exclusive/fair-release.script';
import { commandsRunBy as commandsOn } from './support/commandstats';
import { CONNECT_BUDGET, lockServices, redisKeyOf, warmedUp } from './support/lock-services';
import { startRedis, stopAllRedis, type RedisServer } from './support/redis-server';
import { closeAllProxies, startTcpProxy, type TcpProxy } from './support/tcp-proxy';
import { now, sleep, waitFor } from './support/time';

const prefix = 'fair:';
let server: RedisServer;
let redis: Redis;
let services: ReturnType<typeof lockServices>;
/** Between the server and a slow waiter: `blackhole()` holds its tries back until `heal()`. */
let proxy: TcpProxy;
const keyOf = (key: string): string => redisKeyOf(prefix, key);
const queueOf = (key: string): string => `${keyOf(key)}:queue`;

beforeAll(async () => {
  server = await startRedis();
  redis = new Redis(server.url);
  services = lockServices({ redis: server.url, prefix, fair: true });
  proxy = await startTcpProxy(server.port);
});

afterAll(async () => {
  await services?.closeAll();
  await closeAllProxies();
  redis?.disconnect();
  await stopAllRedis();
});

/**
 * Starts `service.acquire(key)` and resolves once it is queued (the queue has `position` + 1),
 * with the acquisition wrapped (an async function would adopt the promise and wait for it).
 */
async function queuedAcquire(
  service: LockService,
  key: string,
  position: number,
  options: { wait?: number; signal?: AbortSignal } = {},
): Promise<{ acquired: Promise<LockHandle> }> {
  const acquired = service.acquire(key, { wait: 10_000, ...options });
  acquired.catch(() => undefined); // awaited by the test when it expects a rejection
  await waitFor(async () => (await redis.zcard(queueOf(key))) === position + 1, 5_000, 2);
  return { acquired };
}

/**
 * Queues `token` on `key` as a waiter would, with an entry living `lifetime` ms, and never again:
 * a waiter whose process died (or was paused) right after its try.
 */
async function queueVanishedWaiter(key: string, token: string, lifetime: number): Promise<void> {
  const keys = lockRedisKeys(prefix, key);
  await fairAcquireScript.run(
    redis,
    [keys.lock, keys.fence, keys.queue, keys.waiters, keys.holder, keys.waiterIds],
    [token, 30_000, '1', lifetime, 60_000, 'vanished-waiter'],
  );
}

/** The commands the private server ran while `run` ran (see commandsRunBy). */
const commandsRunBy = (run: () => Promise<void>) => commandsOn(redis, run);

const total = (ran: Record<string, number>): number =>
  Object.values(ran).reduce((sum, n) => sum + n, 0);

// First in the file: the server has no queue yet and nothing else runs commands on it.
describe('fair mode without contention', () => {
  it('costs Redis what default mode does: no queue command; at most its holder record and an existence check per script more', async () => {
    const ops = 10;
    const cost = async (service: LockService, tag: string) => {
      await (await service.acquire(`${tag}:warm-up`)).release(); // connection, script cache
      return commandsRunBy(async () => {
        for (let i = 0; i < ops; i++) {
          await (await service.acquire(`${tag}:${i}`, { wait: 1_000 })).release();
        }
      });
    };
    const fair = await cost(services.create(), 'cost-fair');
    const plain = await cost(services.create({ fair: false }), 'cost-plain');
    const queueCommands = ['zrange', 'zrem', 'zadd', 'zscore', 'hget', 'hset', 'hdel'];
    expect(Object.keys(fair).filter((name) => queueCommands.includes(name))).toEqual([]);
    expect(fair.time ?? 0).toBeLessThanOrEqual(plain.time ?? 0);
    // Default mode's token carries its holder; fair mode's hand-offs write a record (the clock
    // and one SET), and its acquire and release each check that no queue exists.
    expect(total(fair)).toBeLessThanOrEqual(total(plain) + 4 * ops);
  });
});

/**
 * Leases that lapse while a waiter queues. The holder's lease runs out unreleased (renew: false:
 * a crashed or paused holder), so no release hands the lock over: it is free, and reserved for
 * the head of the queue. The head is a slow waiter: its service reaches Redis through `proxy`,
 * which holds its tries back from before the lapse until the test has seen a newcomer refused
 * (its try at the lapse would otherwise take the lock first, and the newcomer's refusal would
 * prove nothing). A commandTimeout of 5 s gives it a 10 s queue entry, so it neither refreshes
 * nor lapses meanwhile.
 */
describe('fair mode when a lease lapses while a waiter queues', () => {
  const slowWaiter = (): Promise<LockService> =>
    warmedUp(services.create({ redis: proxy.url, commandTimeout: 5_000 }));

  /** A tryAcquire's answer, as its token (a refusal: null), so a failure shows no whole handle. */
  const tokenOf = (lock: LockHandle | null): string | null => lock?.token ?? null;

  /** Holds the slow waiter's traffic back while `refused` runs, then lets it through. */
  async function whileHeldBack(refused: () => Promise<void>): Promise<void> {
    proxy.blackhole();
    try {
      await refused();
    } finally {
      proxy.heal();
    }
  }

  it("keeps a lock freed by the holder's lapsed lease for the head: a newcomer gets null, the head gets it next", async () => {
    const waiter = await slowWaiter(); // connected first: the 1 s lease is for queueing only
    const holder = await services.create().acquire('lapse', { ttl: 1_000, renew: false });
    const { acquired } = await queuedAcquire(waiter, 'lapse', 0);
    await whileHeldBack(async () => {
      await waitFor(async () => (await redis.pttl(keyOf('lapse'))) === -2, 5_000, 2);
      expect(tokenOf(await services.create().tryAcquire('lapse'))).toBeNull();
      // Refused while the lock was free: nobody took it, it waits for the head.
      expect(await redis.exists(keyOf('lapse'))).toBe(0);
      expect(await redis.zcard(queueOf('lapse'))).toBe(1);
    });
    const lock = await acquired;
    expect(await redis.get(keyOf('lapse'))).toBe(`*${lock.token}`); // out of the queue: marked
    expect(lock.fence).toBeGreaterThan(holder.fence);
    expect(await holder.release()).toBe(false);
    expect(await lock.release()).toBe(true);
  });

  it("keeps a lock the last reader's lapsed share left free for the queued writer: a newcomer writer or reader gets null", async () => {
    const readers = keyOf('lapse-read');
    const writer = await slowWaiter();
    const reader = await services
      .create()
      .acquire('lapse-read', { mode: 'read', ttl: 1_000, renew: false });
    const { acquired } = await queuedAcquire(writer, 'lapse-read', 0);
    await whileHeldBack(async () => {
      // The readers' key lives exactly as long as the last share in it.
      await waitFor(async () => (await redis.pttl(readers)) === -2, 5_000, 2);
      const newcomer = services.create();
      expect(tokenOf(await newcomer.tryAcquire('lapse-read'))).toBeNull();
      expect(tokenOf(await newcomer.tryAcquire('lapse-read', { mode: 'read' }))).toBeNull();
      expect(await redis.exists(keyOf('lapse-read'), readers)).toBe(0);
      expect(await redis.zcard(queueOf('lapse-read'))).toBe(1);
    });
    const lock = await acquired;
    expect(await redis.get(keyOf('lapse-read'))).toBe(`*${lock.token}`); // out of the queue: marked
    expect(await reader.release()).toBe(false);
    expect(await lock.release()).toBe(true);
  });
});

describe('fair mode', () => {
  it('hands the lock to waiters in arrival order, never leaving it free in between', async () => {
    const holder = await services.create().acquire('order');
    const order: number[] = [];
    const waiters: Promise<void>[] = [];
    for (let i = 0; i < 5; i++) {
      // Each waiter is its own service (its own connections), as in separate processes.
      const { acquired: acquired } = await queuedAcquire(services.create(), 'order', i);
      waiters.push(
        acquired.then(async (lock) => {
          order.push(i);
          // The lock went from the previous holder to this one inside one script (marked as
          // waited for while others are still in line).
          expect((await redis.get(keyOf('order')))?.replace(/^\*/, '')).toBe(lock.token);
          await sleep(5);
          await lock.release();
        }),
      );
    }
    await holder.release();
    expect(await redis.get(keyOf('order'))).not.toBeNull(); // handed over, not freed
    await Promise.all(waiters);
    expect(order).toEqual([0, 1, 2, 3, 4]);
    expect(await redis.exists(keyOf('order'), queueOf('order'))).toBe(0);
  });

  it('lets no newcomer barge in: tryAcquire finds it taken the instant it is released', async () => {
    const holder = await services.create().acquire('barge');
    const { acquired: queued } = await queuedAcquire(services.create(), 'barge', 0);
    const newcomer = services.create();
    expect(await newcomer.tryAcquire('barge')).toBeNull();
    expect(await redis.zcard(queueOf('barge'))).toBe(1); // tryAcquire does not queue
    await holder.release();
    expect(await newcomer.tryAcquire('barge')).toBeNull();
    const lock = await queued;
    expect(lock.fence).toBeGreaterThan(holder.fence);
    expect(await lock.release()).toBe(true);
    const last = await newcomer.tryAcquire('barge');
    expect(last).not.toBeNull();
    await last!.release(); // close() would wait for its release
  });

  it('renews a handed-over lock to its full ttl at once', async () => {
    const holder = await services.create().acquire('renew');
    const { acquired: queued } = await queuedAcquire(services.create(), 'renew', 0);
    await holder.release();
    const lock = await queued;
    // The hand-off lease is short (the waiter's entry lifetime, 4 s); the watchdog extends it
    // to the waiter's 30 s ttl.
    await waitFor(async () => (await redis.pttl(keyOf('renew'))) > 20_000, 3_000, 5);
    expect(lock.isHeld).toBe(true);
    expect(await lock.release()).toBe(true);
  });

  it('a waiter whose budget runs out, or that is cancelled, leaves the queue', async () => {
    const holder = await services.create().acquire('leave');
    const budget = services.create().acquire('leave', { wait: 300 });
    await waitFor(async () => (await redis.zcard(queueOf('leave'))) === 1, 5_000, 2);
    await expect(budget).rejects.toBeInstanceOf(LockNotAcquiredError);
    await waitFor(async () => (await redis.zcard(queueOf('leave'))) === 0, 2_000, 2);

    const controller = new AbortController();
    const { acquired: cancelled } = await queuedAcquire(services.create(), 'leave', 0, {
      signal: controller.signal,
    });
    const { acquired: next } = await queuedAcquire(services.create(), 'leave', 1);
    controller.abort(new Error('changed my mind'));
    await expect(cancelled).rejects.toThrow('changed my mind');
    await waitFor(async () => (await redis.zcard(queueOf('leave'))) === 1, 2_000, 2);
    await holder.release();
    expect(await (await next).release()).toBe(true);
  });

  it('a waiter cancelled as the hand-off reaches it passes the lock on (no wait for a lapse)', async () => {
    const holder = await services.create().acquire('race');
    const controller = new AbortController();
    const { acquired: first } = await queuedAcquire(services.create(), 'race', 0, {
      signal: controller.signal,
    });
    const { acquired: second } = await queuedAcquire(services.create(), 'race', 1);
    const releasing = holder.release();
    controller.abort(new Error('gone')); // its leave races the hand-off to it
    await releasing;
    const started = now();
    await first.then(
      (lock) => lock.release(), // it won the race: the lock was handed over before the abort
      () => undefined,
    );
    const lock = await second;
    // Had the hand-off to the leaver not been passed on, this would wait out its 4 s lease.
    expect(now() - started).toBeLessThan(2_000);
    expect(await lock.release()).toBe(true);
  });

  it('a waiter that died in the queue holds it up for at most its entry lifetime, not the ttl', async () => {
    // commandTimeout 300 → a queue entry lives 1 s unless refreshed (max(1000, 2 × 300)).
    const options = { commandTimeout: 300, ttl: 30_000 };
    const holder = await services.create(options).acquire('dead', CONNECT_BUDGET);
    // A waiter that queued and then vanished (its process killed): an entry nobody refreshes.
    // Its entry lapses 1 s after it was queued, and so does the lease a release hands it.
    const queuedAt = now();
    await queueVanishedWaiter('dead', 'dead-waiter-token', 1_000);
    const { acquired: alive } = await queuedAcquire(services.create(options), 'dead', 1);
    const releasedAt = now();
    await holder.release();
    // Handed to the dead waiter (its entry was still live), with a lease of its entry lifetime,
    // marked as waited for: the live waiter is still in line.
    expect(await redis.get(keyOf('dead'))).toBe('*dead-waiter-token');
    expect(await redis.pttl(keyOf('dead'))).toBeLessThanOrEqual(1_000);
    const lock = await alive;
    // Exclusion: not before that lease ended (counted from the queueing, not the release).
    expect(now() - queuedAt).toBeGreaterThanOrEqual(1_000 - 5);
    expect(now() - releasedAt).toBeLessThan(5_000); // the entry lifetime, far from the 30 s ttl
    expect(await lock.release()).toBe(true);
  });

  it('skips a dead waiter whose entry already lapsed', async () => {
    const holder = await services.create().acquire('lapsed');
    await queueVanishedWaiter('lapsed', 'lapsed-waiter-token', 100);
    const { acquired: alive } = await queuedAcquire(services.create(), 'lapsed', 1);
    await sleep(150); // the dead entry lapses; the live one is refreshed
    await holder.release();
    const lock = await alive;
    expect(await redis.get(keyOf('lapsed'))).toBe(`*${lock.token}`); // handed over: marked
    expect(await lock.release()).toBe(true);
  });

  it('finds a hand-off whose message was lost at its next queue refresh', async () => {
    const options = { commandTimeout: 300 }; // entry lifetime 1 s, refreshed every ~333 ms
    const holder = await services.create(options).acquire('lost-message', CONNECT_BUDGET);
    const { acquired: queued } = await queuedAcquire(services.create(options), 'lost-message', 0);
    // Kill the waiters' subscriber connections: the grant message goes nowhere.
    await redis.call('CLIENT', 'KILL', 'TYPE', 'pubsub');
    await holder.release();
    const lock = await queued;
    expect(await redis.get(keyOf('lost-message'))).toBe(`*${lock.token}`); // handed over: marked
    expect(lock.isHeld).toBe(true);
    await waitFor(async () => (await redis.pttl(keyOf('lost-message'))) > 1_000, 3_000, 5);
    expect(await lock.release()).toBe(true);
  });

  it('ignores a hand-off message older than what its last try saw (a long-paused waiter)', async () => {
    const holder = await services.create().acquire('stale');
    const { acquired } = await queuedAcquire(services.create(), 'stale', 0);
    const [token] = await redis.zrange(queueOf('stale'), 0, 0);
    // What a waiter paused past its hand-off lease reads late: a grant from before its last try.
    await redis.publish(`${keyOf('stale')}:released`, `grant:${token}:1`);
    await sleep(100);
    let settled = false;
    void acquired.then(() => (settled = true));
    await sleep(50);
    expect(settled).toBe(false); // still waiting: the holder has it (marked as waited for)
    expect(await redis.get(keyOf('stale'))).toBe(`*${holder.token}`);
    await holder.release();
    const lock = await acquired;
    expect(lock.token).toBe(token);
    expect(lock.fence).toBeGreaterThan(holder.fence);
    expect(await lock.release()).toBe(true);
  });

  it('frees a grant that lands after the call gave up on its first try (no 10 s orphan)', async () => {
    const controller = new AbortController();
    const service = services.create();
    const call = service.acquire('orphan', { ttl: 10_000, signal: controller.signal });
    controller.abort(new Error('gave up')); // the try is on its way and will be granted
    await expect(call).rejects.toThrow('gave up');
    await waitFor(async () => (await redis.exists(keyOf('orphan'))) === 0, 5_000, 5);
  });

  it('sends no try after the call left: a first try answered after the call gave up grants nothing', async () => {
    const service = services.create({ commandTimeout: 200 });
    await (await service.acquire('late:warm-up')).release();
    // The first try's uncontended script answers only when the test says, long after the call
    // timed out and left (its leave sent); "not free" then would have sent the full try next.
    let answer: (reply: number) => void = () => undefined;
    const quick = jest
      .spyOn(fairQuickAcquireScript, 'run')
      .mockImplementationOnce(() => new Promise<number>((resolve) => (answer = resolve)));
    const full = jest.spyOn(fairAcquireScript, 'run');
    const leave = jest.spyOn(fairReleaseScript, 'run');
    try {
      await expect(service.acquire('late', { wait: 0, ttl: 10_000 })).rejects.toThrow();
      await waitFor(() => leave.mock.calls.length > 0, 5_000, 5);
      const tries = full.mock.calls.length;
      answer(0);
      await sleep(100); // a try sent now would have run by then
      expect(full.mock.calls.length).toBe(tries);
      expect(await redis.exists(keyOf('late'))).toBe(0);
    } finally {
      quick.mockRestore();
      full.mockRestore();
      leave.mockRestore();
    }
  });

  it('gives a renew: false lock handed over its full ttl (one extension)', async () => {
    const holder = await services.create().acquire('fixed');
    // A first waiter in between, so the renew: false one gets its lock by a hand-off from it.
    const { acquired } = await queuedAcquire(services.create(), 'fixed', 0);
    const fixedWaiter = services
      .create()
      .acquire('fixed', { ttl: 20_000, renew: false, wait: 10_000 });
    await waitFor(async () => (await redis.zcard(queueOf('fixed'))) === 2, 5_000, 2);
    await holder.release();
    await (await acquired).release();
    const lock = await fixedWaiter;
    // Handed over with a 4 s lease, then extended once to its 20 s ttl before acquire resolved.
    expect(await redis.pttl(keyOf('fixed'))).toBeGreaterThan(10_000);
    expect(await lock.release()).toBe(true);
  });

  it('hands a dead waiter no more than what was left of its entry', async () => {
    const holder = await services.create().acquire('dead-cap');
    await queueVanishedWaiter('dead-cap', 'dead-waiter-token', 1_000);
    await sleep(600); // the entry has ~400 ms left
    await holder.release();
    expect(await redis.get(keyOf('dead-cap'))).toBe('*dead-waiter-token'); // handed over: marked
    expect(await redis.pttl(keyOf('dead-cap'))).toBeLessThanOrEqual(450);
  });

  it('close() passes on a hand-off its own waiter received, and ends that waiting call', async () => {
    const closing = services.create({ shutdownGrace: 0 }); // `holder` is released at once
    const holder = await closing.acquire('closing');
    const { acquired: own } = await queuedAcquire(closing, 'closing', 0);
    const { acquired: other } = await queuedAcquire(services.create(), 'closing', 1);
    const started = now();
    await closing.close(); // releases `holder` → handed to `own` → `own` leaves → to `other`
    await expect(own).rejects.toThrow(/shutting down/);
    expect(holder.isHeld).toBe(false);
    const lock = await other;
    expect(now() - started).toBeLessThan(2_000); // not the 4 s lapse of a stranded hand-off
    expect(await lock.release()).toBe(true);
  });

  it('copes with a garbage queue entry and a fractional commandTimeout', async () => {
    await redis.zadd(queueOf('garbage'), 0, 'garbage-token');
    await redis.hset(`${keyOf('garbage')}:waiters`, 'garbage-token', 'not an entry');
    const service = services.create({ commandTimeout: 600.25 });
    const holder = await service.acquire('garbage'); // the garbage head counts as lapsed
    const { acquired } = await queuedAcquire(service, 'garbage', 0);
    expect(await redis.pttl(queueOf('garbage'))).toBeGreaterThan(0);
    await holder.release();
    expect(await (await acquired).release()).toBe(true);
  });

  it('is refused with redlock or replicaAck (the releaser grants the hand-off)', () => {
    expect(
      () =>
        new LockService({
          fair: true,
          redlock: { nodes: ['redis://a:1', 'redis://b:2', 'redis://c:3'] },
        }),
    ).toThrow(RedisLockConfigError);
    expect(
      () => new LockService({ fair: true, replicaAck: { minReplicas: 1, timeout: 100 } }),
    ).toThrow(RedisLockConfigError);
    expect(() => new LockService({ fair: 'yes' as unknown as boolean })).toThrow(
      RedisLockConfigError,
    );
  });
});
