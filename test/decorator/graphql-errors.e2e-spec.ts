/**
 * What a GraphQL client is told about a lock failure, through a real Apollo server over HTTP: a
 * GraphQL error with a stable `extensions.code` — `LOCK_LOST` for a lock lost while the resolver
 * ran, `LOCK_UNAVAILABLE` when Redis is out of reach — and by default a generic message with no
 * key and no Redis reply (the detail goes to the log only). `errorDetails: 'detailed'` adds the
 * key and the error's own message. `LockExceptionFilter` answers a service's lock failure the same
 * way.
 */
import { Injectable, Logger, type INestApplication } from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import { Args, Mutation, Query, Resolver } from '@nestjs/graphql';
import type Redis from 'ioredis';
import {
  currentLock,
  LockExceptionFilter,
  Locked,
  LockService,
  type LockHandle,
} from 'nestjs-redis-lock';
import { freePort } from '../support/free-port';
import { deleteKeys, redisClient, SHARED_REDIS_URL } from '../support/shared-redis';
import { sleep } from '../support/time';
import { uniquePrefix } from '../support/unique-prefix';
import { createGraphQLApp, gql, type GraphQLAnswer } from './fixtures/graphql-app';

const BUSY = 'Another request is working on the same resource. Try again shortly.';
const UNAVAILABLE = 'The service is temporarily unavailable. Try again later.';
const OUTCOME_UNKNOWN =
  'The request was processed, but its outcome could not be confirmed. Check the result before ' +
  'repeating it.';
const TTL = 600;

/** Every line logged through Nest's `Logger` while the file runs. */
const lines: string[] = [];
let spies: jest.SpyInstance[] = [];
beforeAll(() => {
  spies = (['log', 'warn', 'error', 'debug', 'verbose'] as const).map((level) =>
    jest
      .spyOn(Logger.prototype, level)
      .mockImplementation((...args: unknown[]) => void lines.push(`${level}: ${String(args[0])}`)),
  );
});
afterAll(() => spies.forEach((spy) => spy.mockRestore()));
beforeEach(() => (lines.length = 0));

/** Called once a resolver holds its lock, to take it away ("another process" force-releases). */
let loseIt: (key: string) => Promise<unknown> = async () => undefined;

/** A lock failure from a service a resolver calls (not from the resolver's own `@Locked`). */
@Injectable()
class Wallets {
  @Locked('wallet:<userId>')
  async debit(userId: string): Promise<boolean> {
    return userId !== '';
  }
}

@Resolver()
class JobResolver {
  constructor(private readonly wallets: Wallets) {}

  /** A schema needs a query. */
  @Query(() => String)
  ping(): string {
    return 'pong';
  }

  @Mutation(() => String)
  @Locked('job:<id>', { ttl: TTL, onLost: 'throw' })
  async runJob(@Args('id') id: string): Promise<string> {
    await loseIt(`job:${id}`);
    const { signal } = currentLock()!;
    await new Promise<void>((resolve) => {
      if (signal.aborted) resolve();
      else signal.addEventListener('abort', () => resolve(), { once: true });
    });
    return 'finished';
  }

  @Mutation(() => String)
  @Locked('order:<userId>')
  async placeOrder(@Args('userId') userId: string): Promise<string> {
    return userId;
  }

  @Mutation(() => Boolean)
  async pay(@Args('userId') userId: string): Promise<boolean> {
    return this.wallets.debit(userId);
  }
}

/** Nothing about the key, the user or Redis in what the client receives. */
function expectNothingSpecific(answer: GraphQLAnswer, ...words: string[]): void {
  for (const word of words) expect(answer.text).not.toContain(word);
  expect(answer.text).not.toMatch(/LockNotAcquiredError|LockLostError|RedisUnavailableError/);
  expect(answer.text).not.toMatch(/stacktrace|127\.0\.0\.1/);
}

describe('safe answers (the default)', () => {
  const prefix = uniquePrefix('graphql-errors');
  let app: INestApplication;
  let operator: LockService;
  let redis: Redis;

  beforeAll(async () => {
    redis = redisClient();
    app = await createGraphQLApp({
      lock: { redis: SHARED_REDIS_URL, prefix },
      resolvers: [JobResolver],
      providers: [Wallets, { provide: APP_FILTER, useClass: LockExceptionFilter }],
    });
    operator = new LockService({ redis: SHARED_REDIS_URL, prefix });
  });

  afterAll(async () => {
    loseIt = async () => undefined;
    await operator?.close();
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('a lock lost while the mutation ran: LOCK_LOST, outcome unknown, no key', async () => {
    loseIt = (key) => operator.forceRelease(key);
    const answer = await gql(app, 'mutation { runJob(id: "alice-job") }');
    loseIt = async () => undefined;
    expect(answer.data).toBeNull();
    expect(answer.errors).toEqual([
      {
        message: OUTCOME_UNKNOWN,
        path: ['runJob'],
        locations: expect.any(Array),
        extensions: { code: 'LOCK_LOST' },
      },
    ]);
    expectNothingSpecific(answer, 'alice', 'job:', 'not-owner');
    expect(lines.filter((line) => line.includes('job:alice-job'))).toEqual(
      expect.arrayContaining([
        expect.stringMatching(
          /^error: JobResolver\.runJob answered with a GraphQL error: LockLost/,
        ),
      ]),
    );
  });

  it('busy: LOCK_BUSY with retryAfterMs; the key and the lease only in a verbose line', async () => {
    const held = await operator.acquire('order:alice');
    try {
      const answer = await gql(app, 'mutation { placeOrder(userId: "alice") }');
      expect(answer.errors).toEqual([
        expect.objectContaining({
          message: BUSY,
          extensions: { code: 'LOCK_BUSY', retryAfterMs: 1_000 },
        }),
      ]);
      expectNothingSpecific(answer, 'alice', 'order:', 'frees in');
      // Logged once, at verbose (routine contention): not by Nest's ExceptionsHandler as well.
      expect(lines.filter((line) => line.includes('order:alice'))).toEqual([
        expect.stringMatching(/^verbose: JobResolver\.placeOrder answered with a GraphQL error/),
      ]);
    } finally {
      await held.release();
    }
  });

  it("LockExceptionFilter: a service's busy lock answers LOCK_BUSY, not INTERNAL_SERVER_ERROR", async () => {
    const held = await operator.acquire('wallet:alice');
    try {
      const answer = await gql(app, 'mutation { pay(userId: "alice") }');
      expect(answer.errors).toEqual([
        expect.objectContaining({
          message: BUSY,
          path: ['pay'],
          extensions: { code: 'LOCK_BUSY', retryAfterMs: 1_000 },
        }),
      ]);
      expectNothingSpecific(answer, 'alice', 'wallet:');
      expect(lines.filter((line) => line.includes('wallet:alice'))).toEqual([
        expect.stringMatching(/^verbose: GraphQL Mutation\.pay answered with a GraphQL error/),
      ]);
    } finally {
      await held.release();
    }
  });
});

describe('Redis out of reach', () => {
  let app: INestApplication;

  beforeAll(async () => {
    app = await createGraphQLApp({
      lock: {
        redis: `redis://127.0.0.1:${await freePort()}`,
        prefix: uniquePrefix('graphql-unavailable'),
        commandTimeout: 300,
        startupCheck: 'warn', // the app starts without Redis, to answer while it is out of reach
      },
      resolvers: [JobResolver],
      providers: [Wallets],
    });
  });

  afterAll(async () => {
    await app?.close();
    // A client that never connected keeps a short disconnect timer; let it run out here.
    await sleep(250);
  });

  it('LOCK_UNAVAILABLE with the generic message; the cause only in the log', async () => {
    const answer = await gql(app, 'mutation { placeOrder(userId: "alice") }');
    expect(answer.errors).toEqual([
      expect.objectContaining({
        message: UNAVAILABLE,
        path: ['placeOrder'],
        extensions: { code: 'LOCK_UNAVAILABLE' },
      }),
    ]);
    expectNothingSpecific(answer, 'alice', 'order:', 'commandTimeout');
    expect(lines.filter((line) => line.includes('answered with a GraphQL error'))).toEqual([
      expect.stringMatching(/^error: JobResolver\.placeOrder answered .*RedisUnavailableError/),
    ]);
  });
});

describe("errorDetails: 'detailed'", () => {
  const prefix = uniquePrefix('graphql-detailed');
  let app: INestApplication;
  let locks: LockService;
  let redis: Redis;
  let held: LockHandle | undefined;

  beforeAll(async () => {
    redis = redisClient();
    app = await createGraphQLApp({
      lock: { redis: SHARED_REDIS_URL, prefix, errorDetails: 'detailed' },
      resolvers: [JobResolver],
      providers: [Wallets],
    });
    locks = app.get(LockService);
  });

  afterAll(async () => {
    await held?.release();
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it("busy: the error's own message, the key, and the holder's remaining lease as retryAfterMs", async () => {
    held = await locks.acquire('order:bob', { ttl: 20_000 });
    const answer = await gql(app, 'mutation { placeOrder(userId: "bob") }');
    expect(answer.errors).toEqual([
      expect.objectContaining({
        message: expect.stringContaining('Lock "order:bob" is held by another holder'),
        extensions: { code: 'LOCK_BUSY', key: 'order:bob', retryAfterMs: expect.any(Number) },
      }),
    ]);
    const { retryAfterMs } = answer.errors![0]!.extensions as { retryAfterMs: number };
    expect(retryAfterMs).toBeGreaterThan(1_000);
    expect(retryAfterMs).toBeLessThanOrEqual(20_000);
  });
});
