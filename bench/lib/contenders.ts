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

export type Variant = 'defaults' | 'tuned' | 'reference';

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
  rawReference(5),
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
  return c.variant === 'reference' ? c.library : `${c.library} (${c.variant})`;
}
