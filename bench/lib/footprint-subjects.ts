/** The libraries S6's footprint measures, behind one small interface (bench/lib/footprint.ts). */
import Redis from 'ioredis';
import { LockService } from 'nestjs-redis-lock';
import { Mutex } from 'redis-semaphore';

/** One library instance, as one process of an app holds it (its own connections). */
export interface Side {
  /** Takes `key` (free); resolves with the function that releases it. */
  hold(key: string): Promise<() => Promise<unknown>>;
  /** Waits for `key` (held elsewhere) until `signal` aborts, then rejects. */
  wait(key: string, signal: AbortSignal): Promise<unknown>;
  close(): Promise<void>;
}

export interface Subject {
  id: string;
  label: string;
  settings: string;
  /** SCAN pattern of every key this subject writes (its own prefix per run). */
  pattern: string;
  /** Which of a lock's keys `key` is: 'lock', 'fence', 'holder', 'queue', … */
  kindOf(key: string): string;
  /** INFO commandstats name of a try, and the tries a waiter makes before it sleeps. */
  tryCommand: string;
  triesBeforeSleep: number;
  open(): Promise<Side>;
}

/** Wait budget of our waiters: far longer than a measurement, so none gives up during one. */
const OUR_WAIT_MS = 120_000;

export function ours(url: string, run: string, fair: boolean): Subject {
  const prefix = `bench:fp:${run}:${fair ? 'fair' : 'ours'}:`;
  return {
    id: fair ? 'ours:fair' : 'ours',
    label: fair ? 'nestjs-redis-lock (fair: true)' : 'nestjs-redis-lock (defaults)',
    settings: `new LockService({ redis, prefix${fair ? ', fair: true' : ''} }); acquire(key) to hold; acquire(key, { wait, signal }) to wait`,
    pattern: `${prefix}*`,
    // `<prefix>{<key>}` is the lease; its other keys add a suffix after the hash tag.
    kindOf: (key) => key.slice(key.lastIndexOf('}') + 2) || 'lock',
    // A waiter tries, subscribes to the release channel, tries again (fair: joins the queue), sleeps.
    tryCommand: 'evalsha',
    triesBeforeSleep: 2,
    async open() {
      const locks = new LockService({ redis: url, prefix, fair });
      return {
        async hold(key) {
          const lock = await locks.acquire(key);
          return () => lock.release();
        },
        wait: (key, signal) => locks.acquire(key, { wait: OUR_WAIT_MS, signal }),
        close: () => locks.close(),
      };
    },
  };
}

export function redisSemaphore(url: string, run: string): Subject {
  const prefix = `bench:fp:${run}:sem:`;
  return {
    id: 'redis-semaphore',
    label: 'redis-semaphore Mutex (defaults)',
    settings:
      'new Mutex(client, key) per acquisition — defaults lockTimeout 10000, acquireTimeout 10000, retryInterval 10 (a waiter polls), refreshInterval 8000 (a setInterval per held lock); mutex.acquire(signal)',
    pattern: `mutex:${prefix}*`,
    kindOf: () => 'lock',
    // A waiter sends SET NX PX every retryInterval: it never sleeps for long.
    tryCommand: 'set',
    triesBeforeSleep: 1,
    async open() {
      const client = new Redis(url);
      client.on('error', () => undefined);
      await client.ping();
      return {
        async hold(key) {
          const mutex = new Mutex(client, `${prefix}${key}`);
          await mutex.acquire();
          return () => mutex.release();
        },
        wait: (key, signal) => new Mutex(client, `${prefix}${key}`).acquire(signal),
        close: async () => void (await client.quit()),
      };
    },
  };
}
