import { randomUUID } from 'node:crypto';
import Redis from 'ioredis';
import { LockService } from 'nestjs-redis-lock';
import {
  Redlock as SesameRedlock,
  type Settings as RedlockSettings,
} from '@sesamecare-oss/redlock';
import RedlockBeta from 'redlock';
import { Mutex, type LockOptions } from 'redis-semaphore';
import { createLock, IoredisAdapter, type CreateLockConfig } from 'redlock-universal';

/** A lock held through one library; `release()` resolves once the library says it is released. */
export interface Held {
  release(): Promise<unknown>;
}

/** One library instance (its connections), as one process of an app would hold it. */
export interface Session {
  /** Acquires `key`, waiting as the library does; rejects when the library gives up. */
  acquire(key: string): Promise<Held>;
  close(): Promise<void>;
}

/** `kind`: ours holding another kind of lock than the mutex; uncontended scenarios only. */
export type Variant = 'defaults' | 'tuned' | 'reference' | 'kind';

export interface Contender {
  /** Stable id, used in JSON and to pick the contender in worker processes. */
  id: string;
  library: string;
  variant: Variant;
  /** The exact settings used, printed with the results. */
  settings: string;
  /** Opens a session on `url`; every Redis key it writes starts with `bench:` (or `mutex:bench:`). */
  open(url: string): Promise<Session>;
}

/** Lock lease used for every library that asks for one (ours and redlock-universal default to it). */
export const TTL = 30_000;
/** Wait budget per acquire where the library takes one (redis-semaphore's default acquireTimeout). */
export const WAIT = 10_000;

function connect(url: string): Redis {
  const client = new Redis(url, { lazyConnect: false });
  client.on('error', () => undefined);
  return client;
}

async function ready(client: Redis): Promise<void> {
  if (client.status !== 'ready') await new Promise((resolve) => client.once('ready', resolve));
}

// --- ours: measured only through the public API --------------------------------------------

function oursContender(fair: boolean): Contender {
  return {
    id: fair ? 'ours:fair' : 'ours',
    library: 'nestjs-redis-lock',
    // Fair mode is an option (off by default): a "tuned" setting, measured under contention.
    variant: fair ? 'tuned' : 'defaults',
    settings: fair
      ? `new LockService({ redis, prefix, fair: true }); acquire(key, { wait: ${WAIT} }); waiters queue in Redis, a release hands the lock to the first in line`
      : `new LockService({ redis, prefix }) — module defaults (ttl 30000, retryJitter 10, commandTimeout 2000); acquire(key, { wait: ${WAIT} }); wake-up by pub/sub, no polling interval to tune`,
    async open(url) {
      const locks = new LockService({
        redis: url,
        prefix: fair ? 'bench:ours-fair:' : 'bench:ours:',
        fair,
      });
      // Warm the connection (and the script cache) outside any timed loop.
      await (await locks.acquire(`warmup:${randomUUID()}`)).release();
      return {
        acquire: (key) => locks.acquire(key, { wait: WAIT }),
        close: () => locks.close(),
      };
    },
  };
}

/**
 * Ours taking a read lock or one of 3 permits of a fresh key: their S1/S2 figures beside the
 * mutex's. Never contended: readers and permit holders share a key, which S3 would count as
 * violations.
 */
function oursKindContender(kind: 'read' | 'permits'): Contender {
  const options = kind === 'read' ? { mode: 'read' as const } : { permits: 3 };
  return {
    id: `ours:${kind}`,
    library: 'nestjs-redis-lock',
    variant: 'kind',
    settings: `new LockService({ redis, prefix }); acquire(key, { ${kind === 'read' ? "mode: 'read'" : 'permits: 3'}, wait: ${WAIT} })`,
    async open(url) {
      const locks = new LockService({ redis: url, prefix: `bench:ours-${kind}:` });
      await (await locks.acquire(`warmup:${randomUUID()}`, options)).release();
      return {
        acquire: (key) => locks.acquire(key, { ...options, wait: WAIT }),
        close: () => locks.close(),
      };
    },
  };
}

// --- raw reference: SET NX PX + Lua compare-and-delete on a bare connection ------------------

const DEL_IF_EQUAL = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`;

function rawReference(pollMs: number): Contender {
  return {
    id: 'raw',
    library: 'raw ioredis (floor)',
    variant: 'reference',
    settings: `SET key token NX PX ${TTL} to acquire, EVALSHA compare-and-delete to release (defineCommand); when busy, poll every ${pollMs} ms`,
    async open(url) {
      const client = connect(url);
      client.defineCommand('benchDelIfEqual', { numberOfKeys: 1, lua: DEL_IF_EQUAL });
      const del = (key: string, token: string): Promise<unknown> =>
        (
          client as unknown as Record<string, (k: string, t: string) => Promise<unknown>>
        ).benchDelIfEqual(key, token);
      await ready(client);
      await del('bench:raw:warmup', 'x');
      return {
        async acquire(key) {
          const redisKey = `bench:raw:${key}`;
          const token = randomUUID();
          const deadline = performance.now() + WAIT;
          for (;;) {
            if ((await client.set(redisKey, token, 'PX', TTL, 'NX')) === 'OK') {
              return { release: () => del(redisKey, token) };
            }
            if (performance.now() > deadline) throw new Error('raw: wait budget exhausted');
            await new Promise((resolve) => setTimeout(resolve, pollMs));
          }
        },
        close: async () => void (await client.quit()),
      };
    },
  };
}

// --- fenced floor: the same guarantees as ours, written by hand ------------------------------

/**
 * Acquire: `SET NX PX`, then the fence counter (same hash slot) counts up and lives a day past the
 * lease. A counter that does not exist yet (first use, expired, lost to a restart) starts from
 * Redis' clock in µs (`TIME`: one clock for every client), so fences keep counting up across its
 * loss, as ours do.
 * Busy: the holder is marked as waited for (`*` before its value, TTL kept), so its release wakes
 * the waiters, and the answer is the lock's remaining lease, so a waiter knows when to look again
 * without a message.
 */
const FENCED_ACQUIRE = `if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local fence = redis.call('INCR', KEYS[2])
  if fence == 1 then
    local now = redis.call('TIME')
    fence = tonumber(string.format('%d', now[1] * 1000000 + now[2]))
    redis.call('SET', KEYS[2], string.format('%d', fence), 'PX', ARGV[3])
  else
    redis.call('PEXPIRE', KEYS[2], ARGV[3])
  end
  return {1, fence}
end
local holder = redis.call('GET', KEYS[1])
if holder and string.byte(holder, 1) ~= 42 then
  redis.call('SET', KEYS[1], '*' .. holder, 'KEEPTTL')
end
return {0, redis.call('PTTL', KEYS[1])}`;
/**
 * Release: compare-and-delete, and the wake-up message on `<key>:released` (ours' channel) when a
 * refused try marked the lease.
 */
const FENCED_RELEASE = `local value = redis.call('GET', KEYS[1])
if value == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
if value == '*' .. ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', KEYS[1] .. ':released', ARGV[1])
  return 1
end
return 0`;
/** How long a fence counter outlives its lease, so that fences count up across holders. */
const FENCE_RETENTION_MS = 86_400_000;

type FencedClient = Redis & {
  benchFencedAcquire(
    lockKey: string,
    fenceKey: string,
    value: string,
    ttl: number,
    fenceTtl: number,
  ): Promise<[granted: 0 | 1, fenceOrPttl: number]>;
  benchFencedRelease(lockKey: string, value: string): Promise<0 | 1>;
};

/**
 * The floor a lock with our guarantees cannot go below: one EVALSHA to acquire (lock, fence,
 * holder identity in the value), one to release (compare-and-delete, wake-up message), and
 * waiters woken by that message, with the lease's end as the fallback.
 */
function fencedFloor(): Contender {
  return {
    id: 'fenced',
    library: 'fenced floor (hand-written)',
    variant: 'reference',
    settings:
      `acquire: one EVALSHA (SET key "token:instance:since" NX PX ${TTL}, INCR key:fence, PEXPIRE key:fence ${TTL} + ${FENCE_RETENTION_MS} (a new counter: TIME, SET key:fence <µs> PX instead); ` +
      `busy → mark the holder (SET KEEPTTL), PTTL); release: one EVALSHA (GET = value → DEL, and PUBLISH key:released when marked); ` +
      `waiters SUBSCRIBE key:released before they try, and retry on the message or when the lease ends`,
    async open(url) {
      const client = connect(url) as FencedClient;
      const subscriber = connect(url);
      client.defineCommand('benchFencedAcquire', { numberOfKeys: 2, lua: FENCED_ACQUIRE });
      client.defineCommand('benchFencedRelease', { numberOfKeys: 1, lua: FENCED_RELEASE });
      const instance = randomUUID();
      /**
       * Per channel while someone waits on it: the wake-up callbacks, the SUBSCRIBE reply, and how
       * many messages came (a message can arrive before the busy reply of the try it follows).
       */
      const waiting = new Map<
        string,
        { wakes: Set<() => void>; subscribed: Promise<unknown>; messages: number }
      >();
      subscriber.on('message', (channel: string) => {
        const entry = waiting.get(channel);
        if (!entry) return;
        entry.messages++;
        for (const wake of entry.wakes) wake();
      });
      await Promise.all([ready(client), ready(subscriber)]);
      await client.benchFencedRelease('bench:fenced:warmup', 'x');

      /** Resolves on the next wake-up message in `wakes`, or after `ms`. */
      const wakeUp = (wakes: Set<() => void>, ms: number): Promise<void> =>
        new Promise((resolve) => {
          const done = (): void => {
            clearTimeout(timer);
            wakes.delete(done);
            resolve();
          };
          const timer = setTimeout(done, ms);
          wakes.add(done);
        });

      return {
        async acquire(key) {
          const lockKey = `bench:fenced:{${key}}`;
          const fenceKey = `${lockKey}:fence`;
          const channel = `${lockKey}:released`;
          const token = randomUUID();
          const fenceTtl = TTL + FENCE_RETENTION_MS;
          /** One try; the value names the holder: token, instance, since (ms). */
          const attempt = async (): Promise<{ held?: Held; pttl: number }> => {
            const since = Date.now();
            const value = `${token}:${instance}:${since}`;
            const [granted, fenceOrPttl] = await client.benchFencedAcquire(
              lockKey,
              fenceKey,
              value,
              TTL,
              fenceTtl,
            );
            return granted === 1
              ? { held: { release: () => client.benchFencedRelease(lockKey, value) }, pttl: 0 }
              : { pttl: fenceOrPttl };
          };
          // The uncontended path: one round trip, no subscription.
          let tried = await attempt();
          if (tried.held) return tried.held;
          // Subscribe before the next try, so a release between the try and the wait still wakes us.
          const deadline = performance.now() + WAIT;
          let entry = waiting.get(channel);
          if (!entry) {
            entry = { wakes: new Set(), subscribed: subscriber.subscribe(channel), messages: 0 };
            waiting.set(channel, entry);
          }
          const { wakes } = entry;
          const member = (): void => undefined;
          wakes.add(member);
          try {
            await entry.subscribed;
            for (;;) {
              const seen = entry.messages;
              tried = await attempt();
              if (tried.held) return tried.held;
              const left = deadline - performance.now();
              if (left <= 0) throw new Error('fenced: wait budget exhausted');
              // A release came while the try was on its way: try again rather than wait for the next.
              if (entry.messages !== seen) continue;
              await wakeUp(wakes, Math.min(left, Math.max(1, tried.pttl)));
            }
          } finally {
            wakes.delete(member);
            if (wakes.size === 0 && waiting.get(channel) === entry) {
              waiting.delete(channel);
              void subscriber.unsubscribe(channel).catch(() => undefined);
            }
          }
        },
        close: async () => {
          await Promise.all([client.quit(), subscriber.quit()]);
        },
      };
    },
  };
}

// --- node-redlock v5 API (two packages) --------------------------------------------------

type RedlockLike = {
  acquire(resources: string[], duration: number): Promise<{ release(): Promise<unknown> }>;
};
type RedlockCtor = new (clients: Redis[], settings?: RedlockSettings) => RedlockLike;

function redlockContender(
  id: string,
  library: string,
  Ctor: RedlockCtor,
  variant: Variant,
  settings: RedlockSettings | undefined,
  defaultsText: string,
): Contender {
  return {
    id: `${id}:${variant}`,
    library,
    variant,
    settings:
      (settings
        ? `new Redlock([client], ${JSON.stringify(settings)})`
        : `new Redlock([client]) — ${defaultsText}`) + `; acquire([key], ${TTL}), lock.release()`,
    async open(url) {
      const client = connect(url);
      await ready(client);
      const redlock = new Ctor([client], settings);
      await (await redlock.acquire([`bench:${id}:warmup:${randomUUID()}`], TTL)).release();
      return {
        acquire: (key) => redlock.acquire([`bench:${id}:${key}`], TTL),
        close: async () => void (await client.quit()),
      };
    },
  };
}

const REDLOCK_DEFAULTS =
  'defaults retryCount 10, retryDelay 200, retryJitter 100, driftFactor 0.01';
/** ~5 ms polling, and a retry budget comparable to a 10 s wait. */
const REDLOCK_TUNED: RedlockSettings = { retryDelay: 5, retryJitter: 2, retryCount: 2_000 };

// --- redis-semaphore -------------------------------------------------------------------------

function semaphoreContender(variant: Variant, options: LockOptions | undefined): Contender {
  return {
    id: `redis-semaphore:${variant}`,
    library: 'redis-semaphore',
    variant,
    settings:
      (options
        ? `new Mutex(client, key, ${JSON.stringify(options)})`
        : 'new Mutex(client, key) — defaults lockTimeout 10000, acquireTimeout 10000, retryInterval 10, refreshInterval 8000') +
      '; one Mutex per acquisition, mutex.acquire(), mutex.release()',
    async open(url) {
      const client = connect(url);
      await ready(client);
      return {
        async acquire(key) {
          const mutex = new Mutex(client, `bench:${key}`, options);
          await mutex.acquire();
          return { release: () => mutex.release() };
        },
        close: async () => void (await client.quit()),
      };
    },
  };
}

// --- redlock-universal -----------------------------------------------------------------------

type UniversalTuning = Pick<CreateLockConfig, 'retryAttempts' | 'retryDelay'>;

function universalContender(variant: Variant, tuning: UniversalTuning | undefined): Contender {
  return {
    id: `redlock-universal:${variant}`,
    library: 'redlock-universal',
    variant,
    settings:
      (tuning
        ? `createLock({ adapter, key, ttl: ${TTL}, ${Object.entries(tuning)
            .map(([k, v]) => `${k}: ${v}`)
            .join(', ')} })`
        : `createLock({ adapter, key, ttl: ${TTL} }) — defaults retryAttempts 3, retryDelay 100, circuit breaker on (PINGs once per lock object per 30 s)`) +
      '; one lock object per key (cached), lock.acquire(), lock.release(handle)',
    async open(url) {
      const client = connect(url);
      await ready(client);
      const adapter = new IoredisAdapter(client);
      type UniversalLock = ReturnType<typeof createLock>;
      const lockObjects = new Map<string, UniversalLock>();
      const lockFor = (key: string): UniversalLock => {
        let lock = lockObjects.get(key);
        if (!lock) {
          if (lockObjects.size > 10_000) lockObjects.clear();
          lock = createLock({ adapter, key: `bench:universal:${key}`, ttl: TTL, ...tuning });
          lockObjects.set(key, lock);
        }
        return lock;
      };
      const warm = lockFor(`warmup:${randomUUID()}`);
      await warm.release(await warm.acquire());
      return {
        async acquire(key) {
          const lock = lockFor(key);
          const handle = await lock.acquire();
          return { release: () => lock.release(handle) };
        },
        close: async () => void (await client.quit()),
      };
    },
  };
}

/** Every contender, in the order of the tables. */
export const CONTENDERS: Contender[] = [
  oursContender(false),
  oursContender(true),
  oursKindContender('read'),
  oursKindContender('permits'),
  rawReference(5),
  fencedFloor(),
  redlockContender(
    'sesame-redlock',
    '@sesamecare-oss/redlock',
    SesameRedlock as unknown as RedlockCtor,
    'defaults',
    undefined,
    REDLOCK_DEFAULTS,
  ),
  redlockContender(
    'sesame-redlock',
    '@sesamecare-oss/redlock',
    SesameRedlock as unknown as RedlockCtor,
    'tuned',
    REDLOCK_TUNED,
    REDLOCK_DEFAULTS,
  ),
  redlockContender(
    'redlock',
    'redlock@5.0.0-beta.2',
    RedlockBeta as unknown as RedlockCtor,
    'defaults',
    undefined,
    REDLOCK_DEFAULTS,
  ),
  redlockContender(
    'redlock',
    'redlock@5.0.0-beta.2',
    RedlockBeta as unknown as RedlockCtor,
    'tuned',
    REDLOCK_TUNED,
    REDLOCK_DEFAULTS,
  ),
  semaphoreContender('defaults', undefined),
  semaphoreContender('tuned', { retryInterval: 5 }),
  universalContender('defaults', undefined),
  universalContender('tuned', { retryDelay: 5, retryAttempts: 2_000 }),
];

export function contenderById(id: string): Contender {
  const found = CONTENDERS.find((c) => c.id === id);
  if (!found) throw new Error(`unknown contender ${id}`);
  return found;
}

/** Label used in tables. */
export function label(c: Contender): string {
  if (c.id === 'ours:fair') return `${c.library} (fair: true)`;
  if (c.id === 'ours:read') return `${c.library} (mode: 'read')`;
  if (c.id === 'ours:permits') return `${c.library} (permits: 3)`;
  return c.variant === 'reference' ? c.library : `${c.library} (${c.variant})`;
}
