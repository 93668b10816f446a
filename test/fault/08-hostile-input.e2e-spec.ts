/**
 * Scenario 8 — hostile keys and options. Every input is either a well-defined key of its own or a
 * LockKeyError: never a crash, never two distinct inputs sharing a lock, never a glob or hash-tag
 * surprise (checked on a real one-node Redis Cluster: a lock's keys must share one slot). Invalid
 * options are rejected at startup with RedisLockConfigError.
 */
import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import Redis from 'ioredis';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  currentLock,
  Locked,
  LockKeyError,
  LockService,
  RedisCommandError,
  RedisLockConfigError,
  RedisLockError,
  RedisLockModule,
  type RedisLockModuleOptions,
} from 'nestjs-redis-lock';
import { hostProcess } from '../support/host-process';
import { startRedis, stopAllRedis, type RedisServer } from '../support/redis-server';
import { sleep, waitFor } from '../support/time';
import { errorName, leaseKeysUnder, lockKeys, observe, outcome } from './fault-support';

const PREFIX = 'hostile:';
const MB = 'x'.repeat(1024 * 1024);

let server: RedisServer;
let redis: Redis;
let locks: LockService;
const services: LockService[] = [];

beforeAll(async () => {
  server = await startRedis();
  redis = new Redis(server.url);
  locks = new LockService({ redis: server.url, prefix: PREFIX });
  services.push(locks);
});

afterAll(async () => {
  await Promise.all(services.map((service) => service.close()));
  redis?.disconnect();
  await stopAllRedis();
});

/** Keys that are hostile but legal: each must lock its own resource. */
const HOSTILE_KEYS = [
  'line\nbreak',
  'crlf\r\nINJECT',
  '\r\n*1\r\n$8\r\nFLUSHALL\r\n', // RESP injection attempt: arguments are length-prefixed
  'with spaces',
  ' ',
  '{braces}',
  '{',
  '}}',
  'a}b{c',
  '*',
  '?',
  '[a-z]',
  'glob*?[]',
  '\\',
  '%25',
  '%',
  'caf\u00e9', // é precomposed (NFC)
  'cafe\u0301', // e + combining accent (NFD): a different string, a different lock
  '😀',
  '\u202eRTL override',
  '\u0000nul',
  '__proto__',
  'constructor',
  'prototype',
  'toString',
  'hasOwnProperty',
  '0',
  '-0',
  '42',
  'k'.repeat(512), // exactly maxKeyLength
];

/** EVALSHA + EVAL calls the server ran since the last CONFIG RESETSTAT. */
async function scriptCalls(client: Redis): Promise<number> {
  const stats = String(await client.info('commandstats'));
  let calls = 0;
  for (const match of stats.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm))
    calls += Number(match[1]);
  return calls;
}
describe('scenario 8: hostile keys on LockService', () => {
  it('gives every hostile key its own lock, all held at once, none colliding', async () => {
    const held = await Promise.all(HOSTILE_KEYS.map((key) => locks.acquire(key)));
    const leases = await leaseKeysUnder(redis, PREFIX);
    expect(leases).toHaveLength(HOSTILE_KEYS.length);
    for (const [i, key] of HOSTILE_KEYS.entries()) {
      // The Redis name the library gives the key (as it is; one more `{` before a leading brace).
      expect(await redis.get(locks.engine.keysOf(key).lock)).toBe(held[i]!.token);
      expect(await locks.isLocked(key)).toBe(true);
    }
    // Glob characters are literal: `*` held does not make other keys look locked.
    expect(await locks.isLocked('anything')).toBe(false);
    expect(await locks.forceRelease('[a-z]*')).toBe(false);
    for (const lock of held) expect(await lock.release()).toBe(true);
    expect(await leaseKeysUnder(redis, PREFIX)).toEqual([]);
    expect(await redis.ping()).toBe('PONG'); // nothing injected
    expect(await redis.dbsize()).toBeGreaterThan(0); // fence counters still there: no FLUSHALL
    observe('8-hostile-keys', { keys: HOSTILE_KEYS.length, distinctLocks: leases.length });
  });

  it('fails cleanly when foreign data of another type sits under the lock key', async () => {
    // An application key that collides with the lock's name (a hash, not a string).
    await redis.hset(locks.engine.keysOf('occupied').lock, 'field', 'value');
    await (await locks.acquire('warm-up')).release(); // scripts cached: no NOSCRIPT round
    await redis.config('RESETSTAT');
    // A wait budget does not turn it into retries: WRONGTYPE is final, so it fails at once.
    const result = await outcome(locks.acquire('occupied', { wait: 5_000 }));
    expect(result.ok).toBe(false);
    const error = (result as { error: unknown }).error;
    expect(error).toBeInstanceOf(RedisCommandError);
    expect((error as RedisCommandError).code).toBe('WRONGTYPE');
    expect((error as Error).message).toMatch(/"occupied".*WRONGTYPE.*`prefix` option/);
    expect(await scriptCalls(redis)).toBe(1); // one try, no retry loop
    expect(await redis.hget(locks.engine.keysOf('occupied').lock, 'field')).toBe('value');
    observe('8-foreign-type', {
      error: errorName((result as { error: unknown }).error),
      message: ((result as { error: Error }).error.message ?? '').slice(0, 80),
    });
    await redis.del(locks.engine.keysOf('occupied').lock);
    expect(await (await locks.acquire('occupied')).release()).toBe(true);
  });

  it('waits on its own channel literally: no pattern subscription a glob key could widen', async () => {
    const held = await locks.acquire('room:*');
    const other = new LockService({ redis: server.url, prefix: PREFIX });
    services.push(other);
    const waiting = other.acquire('room:*', { wait: 5_000 });
    const numsub = async (key: string) =>
      Number((await redis.pubsub('NUMSUB', lockKeys(PREFIX, key).channel))[1]);
    await waitFor(async () => (await numsub('room:*')) === 1);
    expect(await redis.pubsub('NUMPAT')).toBe(0);
    expect(await numsub('room:1')).toBe(0);
    await held.release();
    await (await waiting).release();
  });

  it.each<[string, unknown]>([
    ['an empty string', ''],
    ['a key over maxKeyLength', 'k'.repeat(513)],
    ['a 1 MB string', MB],
    ['a number', 42],
    ['null', null],
    ['undefined', undefined],
    ['an object', { toString: () => 'sneaky' }],
    ['a String object', Object('boxed')],
    // An array names several keys (a multi-key lock): each must be a valid key itself.
    ['an array holding a number', [42]],
    ['an array holding an object', ['a', { toString: () => 'sneaky' }]],
    ['an empty array', []],
    ['a symbol', Symbol('s')],
  ])('rejects %s as a key with LockKeyError', async (_, key) => {
    const result = await outcome(locks.acquire(key as string));
    expect(result.ok).toBe(false);
    expect((result as { error: unknown }).error).toBeInstanceOf(LockKeyError);
  });

  it('gives ill-formed UTF-16 keys (lone surrogates) distinct locks, or rejects them', async () => {
    // Redis keys are bytes; ioredis writes a lone surrogate as U+FFFD (EF BF BD), so these
    // three different strings would name one Redis key.
    const keys = ['lone\uD800', 'lone\uDC00', 'lone\uFFFD'];
    const results = await Promise.all(keys.map((key) => outcome(locks.acquire(key))));
    const outcomes = results.map((result) => (result.ok ? 'lock' : errorName(result.error)));
    observe('8-lone-surrogates', {
      outcomes,
      redisLeaseKeys: (await leaseKeysUnder(redis, PREFIX)).length,
    });
    for (const result of results) if (result.ok) await result.value.release();
    // Each one is its own lock or a LockKeyError; "busy" means two of them collided.
    expect(outcomes.filter((name) => name !== 'lock' && name !== 'LockKeyError')).toEqual([]);
  });
});

describe('scenario 8: hash tags on a Redis Cluster (one node, all slots)', () => {
  let dir: string;
  let port: number;
  let clusterLocks: LockService;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'nestjs-redis-lock-fault-cluster-'));
    const node = await startRedis({
      args: [
        ...['--cluster-enabled', 'yes', '--cluster-config-file', join(dir, 'nodes.conf')],
        ...['--cluster-announce-ip', '127.0.0.1'],
      ],
    });
    const admin = new Redis(node.url);
    // Every slot to this node (ADDSLOTS with each slot: ADDSLOTSRANGE needs Redis 7).
    await admin.call('CLUSTER', 'ADDSLOTS', ...Array.from({ length: 16384 }, (_, slot) => slot));
    await waitFor(
      async () => String(await admin.call('CLUSTER', 'INFO')).includes('cluster_state:ok'),
      10_000,
      50,
    );
    admin.disconnect();
    port = node.port;
    clusterLocks = new LockService({
      cluster: { nodes: [{ host: '127.0.0.1', port }] },
      prefix: PREFIX,
    });
    services.push(clusterLocks);
  }, 20_000);

  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('rejects a prefix that empties the hash tag ("app{}") at startup, or still locks', async () => {
    let service: LockService | undefined;
    let error: unknown;
    try {
      service = new LockService({
        cluster: { nodes: [{ host: '127.0.0.1', port }] },
        prefix: 'app{}',
      });
      services.push(service);
    } catch (thrown) {
      error = thrown;
    }
    const firstUse = service ? await outcome(service.acquire('order:1')) : undefined;
    if (firstUse?.ok) await firstUse.value.release();
    observe('8-cluster-prefix', {
      atStartup: error ? errorName(error) : 'accepted',
      firstUse: firstUse && (firstUse.ok ? 'ok' : (firstUse.error as Error).message),
    });
    if (!error) expect(firstUse?.ok).toBe(true);
    else expect(error).toBeInstanceOf(RedisLockConfigError);
  });

  it('locks every hostile key on a cluster (its keys share one slot: no CROSSSLOT)', async () => {
    const failures: Record<string, string> = {};
    for (const key of [...HOSTILE_KEYS, '}', '}x', '}{', '}}}']) {
      const result = await outcome(clusterLocks.acquire(key));
      if (result.ok) expect(await result.value.release()).toBe(true);
      else failures[JSON.stringify(key)] = (result.error as Error).message;
    }
    observe('8-cluster-hash-tags', { failures: Object.keys(failures) });
    expect(failures).toEqual({});
  });
});

describe('scenario 8: hostile values in @Locked key templates', () => {
  /* eslint-disable @typescript-eslint/no-unused-vars -- the parameter names are the placeholders */
  @Injectable()
  class Orders {
    @Locked('order:<userId>:<voucherId>')
    async place(userId: unknown, voucherId: unknown): Promise<string> {
      return currentLock()!.key;
    }

    @Locked('doc:<dto.id>')
    async save(dto: unknown): Promise<string> {
      return currentLock()!.key;
    }

    @Locked('emoji:<a>😀<b>')
    async emoji(a: unknown, b: unknown): Promise<string> {
      return currentLock()!.key;
    }
  }
  /* eslint-enable @typescript-eslint/no-unused-vars */

  let orders: Orders;
  let close: () => Promise<void>;

  beforeAll(async () => {
    // Declared here, once the private server's URL is known (never the shared Redis).
    @Module({
      imports: [RedisLockModule.forRoot({ redis: server.url, prefix: PREFIX })],
      providers: [Orders],
    })
    class AppModule {}
    const app = await NestFactory.createApplicationContext(AppModule, { logger: false });
    orders = app.get(Orders);
    close = () => app.close();
  });

  afterAll(() => close?.());

  it('renders distinct argument tuples to distinct keys (no separator, brace or glob surprises)', async () => {
    const tuples: [unknown, unknown][] = [
      ['a:b', 'c'],
      ['a', 'b:c'],
      ['a%3Ab', 'c'],
      ['a', 'b%3Ac'],
      ['{x}', 'y'],
      ['x', '{y}'],
      ['*', '?'],
      ['[', ']'],
      ['line\nbreak', 'z'],
      ['__proto__', 'constructor'],
      ['😀', 'é'],
      ['%', '%'],
      [' ', ' '],
      ['\uD800', 'lone'],
      ['\uDC00', 'lone'],
      ['\uFFFD', 'lone'],
    ];
    const keys = await Promise.all(tuples.map(([u, v]) => orders.place(u, v)));
    expect(new Set(keys).size).toBe(tuples.length);
    for (const key of keys) {
      expect(key.startsWith('order:')).toBe(true);
      expect(key).not.toMatch(/[{}*?[\]\n]/); // no raw hash tag, glob or control character
    }
    observe('8-template-tuples', { tuples: tuples.length, distinctKeys: new Set(keys).size });
  });

  it('treats numbers, bigints and booleans like their string form, as documented', async () => {
    expect(await orders.place(42, 1)).toBe(await orders.place('42', '1'));
    expect(await orders.place(42n, true)).toBe(await orders.place('42', 'true'));
    expect(await orders.place(-0, 0)).toBe(await orders.place('0', '0'));
  });

  it.each<[string, unknown]>([
    ['undefined', undefined],
    ['null', null],
    ['an empty string', ''],
    ['NaN', NaN],
    ['Infinity', Infinity],
    ['an object', { id: 1 }],
    // An array names several keys (a multi-key lock): each must be a valid key itself.
    ['an array holding a number', [42]],
    ['an array holding an object', ['a', { toString: () => 'sneaky' }]],
    ['an empty array', []],
    ['a symbol', Symbol('s')],
    ['a function', () => 'k'],
    ['a Date', new Date(0)],
    ['a 1 MB string', MB],
  ])('rejects %s as a key part with LockKeyError, and keeps serving', async (_, value) => {
    const result = await outcome(orders.place(value, 'v'));
    expect(result.ok).toBe(false);
    expect((result as { error: unknown }).error).toBeInstanceOf(LockKeyError);
    expect(await orders.place('still', 'works')).toBe('order:still:works');
  });

  it('never reads a key part through the prototype chain', async () => {
    const polluted = JSON.parse('{"__proto__": {"id": "from-proto"}}') as unknown;
    const inherited = Object.create({ id: 'inherited' }) as unknown;
    for (const dto of [polluted, inherited, { constructor: { id: 'x' } }]) {
      const result = await outcome(orders.save(dto));
      expect(result.ok).toBe(false);
      expect((result as { error: unknown }).error).toBeInstanceOf(LockKeyError);
    }
    expect(({} as { id?: unknown }).id).toBeUndefined(); // nothing was polluted
    expect(await orders.save({ id: '__proto__' })).toBe('doc:__proto__');
  });

  it('keeps tuples distinct when the separator is outside the BMP (an emoji)', async () => {
    const first = await orders.emoji('x😀y', 'z');
    const second = await orders.emoji('x', 'y😀z');
    observe('8-emoji-separator', { first, second, collide: first === second });
    expect(first).not.toBe(second);
  });
});

describe('scenario 8: invalid options are rejected at startup', () => {
  const numeric: [keyof RedisLockModuleOptions, unknown[]][] = [
    ['ttl', [NaN, Infinity, -Infinity, -1, 0, '1000', null, true, {}]],
    ['wait', [NaN, Infinity, -1, '0', null, false]],
    ['retryJitter', [NaN, Infinity, -1, '10', null]],
    ['maxKeyLength', [NaN, Infinity, -1, 0, '512', null]],
    ['commandTimeout', [NaN, Infinity, -1, 0, '2000', null]],
    ['fenceRetention', [NaN, Infinity, -1, '60000', null]],
    ['busyStatus', [NaN, 200, 600, 409.5, '409']],
  ];
  const other: [keyof RedisLockModuleOptions, unknown[]][] = [
    ['prefix', ['', 42, null]],
    ['onBusy', ['wait', '', 1]],
    ['onLost', ['ignore', null]],
    ['reentrant', ['yes', 1]],
    ['redis', ['http://127.0.0.1:6379', 'redis//host', 'not a url', 42, null]],
    ['exceptionFactory', ['not a function', 42]],
  ];
  const cases = [...numeric, ...other].flatMap(([name, values]) =>
    values.map((value) => [name, value] as const),
  );

  it.each(cases)('new LockService({ %s: %p }) throws RedisLockConfigError', (name, value) => {
    // `redis` is set so that an option wrongly accepted never connects to a default server.
    const options = { redis: server.url, [name]: value } as RedisLockModuleOptions;
    expect(() => services.push(new LockService(options))).toThrow(RedisLockConfigError);
  });

  it.each<[string, RedisLockModuleOptions]>([
    ['a ttl Redis cannot store (1e21 ms)', { ttl: 1e21 }],
    ['a ttl whose renewal period overflows setTimeout (2^31 × 4 ms)', { ttl: 2 ** 31 * 4 }],
    ['a commandTimeout that overflows setTimeout (2^31 ms)', { commandTimeout: 2 ** 31 }],
  ])('rejects %s at startup', async (_, options) => {
    let error: unknown;
    let service: LockService | undefined;
    try {
      service = new LockService({ redis: server.url, ...options });
      services.push(service);
    } catch (thrown) {
      error = thrown;
    }
    // Accepted: show what happens at the first lock (held 50 ms) instead.
    const overflows: string[] = [];
    const onWarning = (warning: Error): void => {
      if (warning.name === 'TimeoutOverflowWarning') overflows.push(warning.message);
    };
    hostProcess.on('warning', onWarning);
    const firstUse = service
      ? await outcome(service.acquire(`first-use:${JSON.stringify(options)}`))
      : undefined;
    if (firstUse?.ok) {
      await sleep(50);
      await firstUse.value.release();
    }
    hostProcess.off('warning', onWarning);
    observe('8-out-of-range-option', {
      options: JSON.stringify(options),
      atStartup: error ? errorName(error) : 'accepted',
      firstUse: firstUse ? (firstUse.ok ? 'ok' : (firstUse.error as Error).message) : undefined,
      timeoutOverflows: overflows.length, // each one is a timer Node cut to 1 ms
    });
    expect(error).toBeInstanceOf(RedisLockConfigError);
  });

  it('fails the application bootstrap on invalid module options', async () => {
    for (const options of [{ ttl: NaN }, { wait: -5 }, { commandTimeout: Infinity }]) {
      @Module({ imports: [RedisLockModule.forRoot({ redis: server.url, ...options })] })
      class BadModule {}
      const result = await outcome(
        NestFactory.createApplicationContext(BadModule, { logger: false, abortOnError: false }),
      );
      expect(result.ok).toBe(false);
      expect((result as { error: unknown }).error).toBeInstanceOf(RedisLockConfigError);
    }
  });

  it.each<[string, object]>([
    ['ttl: NaN', { ttl: NaN }],
    ['wait: Infinity', { wait: Infinity }],
    ['ttl: -1', { ttl: -1 }],
    ['onBusy: "later"', { onBusy: 'later' }],
  ])('@Locked(key, { %s }) throws at class definition', (_, options) => {
    expect(() => {
      class Job {
        @Locked('job', options)
        async run(): Promise<void> {}
      }
      return Job;
    }).toThrow(RedisLockConfigError);
  });

  it('reports every rejection as a RedisLockError with the option named', () => {
    try {
      services.push(new LockService({ redis: server.url, ttl: Number('abc') }));
    } catch (error) {
      expect(error).toBeInstanceOf(RedisLockError);
      expect((error as Error).message).toMatch(/`ttl`/);
    }
  });
});
