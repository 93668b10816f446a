/**
 * Semaphore findings of the adversarial review, each a scenario that failed before its fix: a
 * wake-up lost when two places free at once; a limit conflict's message (the Redis key, with the
 * request's values in it) sent to a GraphQL client; a re-sent grant answered with another
 * holder's fence.
 */
import { Logger, type INestApplication } from '@nestjs/common';
import { Args, Mutation, Query, Resolver } from '@nestjs/graphql';
import { Locked } from 'nestjs-redis-lock';
import type { LockBackend } from '../../lib/backends/lock-backend';
import { MemoryLockBackend } from '../../lib/backends/memory.backend';
import { RedisBackend } from '../../lib/backends/redis.backend';
import { lockRedisKeys, type LockRedisKeys } from '../../lib/keys/lock-keys';
import { onSharedRedis } from '../support/lock-services';
import { SHARED_REDIS_URL } from '../support/shared-redis';
import { Gate, now, sleep, waitFor } from '../support/time';
import { createGraphQLApp, gql } from '../decorator/fixtures/graphql-app';

const { prefix, redis, services } = onSharedRedis('semaphore-review');

afterEach(() => jest.restoreAllMocks());

describe('wake-ups when several places free at once', () => {
  it('hands a wake-up the winner no longer needs to the next waiter (two releases, two waiters)', async () => {
    const holder = services.create({ ttl: 10_000 });
    const waiting = services.create({ ttl: 10_000 });
    const held = await Promise.all([1, 2].map(() => holder.acquire('two-free', { permits: 2 })));
    // A waits first and sleeps towards its fallback: the holders' 10 s leases (renewed).
    const first = waiting.acquire('two-free', { permits: 2, wait: 8_000 });
    await sleep(200);

    // From here, the waiting service's tries on the key run in Redis at once, but the replies of
    // its 2nd and 3rd (B's second try, then A's try when woken) are held until the gate opens:
    // both waiters are then busy trying, not sleeping, while the two release messages arrive.
    const gate = new Gate();
    const executed: Promise<unknown>[] = [];
    const original = RedisBackend.prototype.acquire;
    let calls = 0;
    jest.spyOn(RedisBackend.prototype, 'acquire').mockImplementation(function (
      this: RedisBackend,
      keys: LockRedisKeys,
      token,
      ttl,
    ) {
      const reply = original.call(this, keys, token, ttl);
      if (this !== backendOf(waiting) || !keys.lock.includes('{two-free}')) return reply;
      calls++;
      if (calls < 2 || calls > 3) return reply;
      const opened = gate.opened; // with the signal, before the reply (see Gate)
      executed.push(reply);
      return reply.then(async (fence) => (await opened, fence));
    });
    const second = waiting.acquire('two-free', { permits: 2, wait: 4_000 });
    await waitFor(() => executed.length === 1, 3_000); // B's second try: busy, reply held
    await executed[0];
    await Promise.all(held.map((lock) => lock.release())); // two places free: two messages
    await waitFor(() => executed.length === 2, 3_000); // A woken: its try granted, reply held
    await executed[1];
    await sleep(100); // the second message has arrived meanwhile
    const opened = now();
    gate.release();

    const a = await first;
    const b = await second;
    // Before the fix, B slept until its wait ran out (4 s; its fallback was the 10 s leases)
    // while a place stood free, and took it only on its last try.
    expect(now() - opened).toBeLessThan(2_000);
    await Promise.all([a, b].map((lock) => lock.release()));
  });
});

@Resolver()
class ExportResolver {
  /** A schema needs a query. */
  @Query(() => String)
  ping(): string {
    return 'pong';
  }

  @Mutation(() => String)
  @Locked('export:<tenantId>', { permits: 3 })
  async startExport(@Args('tenantId') tenantId: string): Promise<string> {
    return tenantId;
  }
}

describe('what a client is told of a limit conflict', () => {
  let app: INestApplication;
  beforeAll(async () => {
    jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    app = await createGraphQLApp({
      lock: { redis: SHARED_REDIS_URL, prefix },
      resolvers: [ExportResolver],
    });
  });
  afterAll(() => app?.close());

  it('answers a GraphQL call that names another N with a generic error: no key, no tenant', async () => {
    const other = services.create();
    // An instance still on the old limit holds the tenant's semaphore (a rollout of a new N).
    const held = await other.acquire('export:tenant-4711', { permits: 2 });
    const answer = await gql(app, 'mutation { startExport(tenantId: "tenant-4711") }');
    await held.release();
    expect(answer.errors).toHaveLength(1);
    // Before the fix: "Semaphore <prefix>{export:tenant-4711}:permits is held with permits: 2…"
    expect(answer.text).not.toContain('4711');
    expect(answer.text).not.toContain(prefix);
    expect(answer.errors![0]!.extensions).toMatchObject({ code: 'LOCK_UNAVAILABLE' });
  });
});

describe('a grant re-sent after a connection reset', () => {
  const backends: [string, () => LockBackend][] = [
    ['Redis', () => new RedisBackend({ client: redis, owned: false }, 1_000, 60_000)],
    ['memory', () => new MemoryLockBackend({ fenceRetention: 60_000 })],
  ];
  it.each(backends)(
    'answers the re-sent grant with a fence of its own, not a later holder’s (%s)',
    async (name, create) => {
      const backend = create();
      const keys = lockRedisKeys(prefix, `resent-${name}`, { type: 'semaphore', permits: 3 });
      try {
        const first = await backend.acquire(keys, 'a', 5_000); // its reply lost in a reset
        const other = await backend.acquire(keys, 'b', 5_000); // another holder, meanwhile
        // ioredis sends the same command again on the new connection: same token, same args.
        const resent = await backend.acquire(keys, 'a', 5_000);
        expect(other).toBeGreaterThan(first);
        // Before the fix: the counter as it stood, i.e. b's fence — two live holders with one
        // fence, so a store deduplicating writes by fence dropped one of them.
        expect(resent).not.toBe(other);
        expect(resent).toBeGreaterThan(other); // never handed out before: unique, increasing
        expect(await backend.isLocked(keys)).toBe(true);
        // Still one place each: the re-send took no second permit.
        const third = await backend.acquire(keys, 'c', 5_000);
        expect(third).toBeGreaterThan(resent);
        expect(await backend.acquire(keys, 'd', 5_000)).toBeLessThanOrEqual(0);
        for (const token of ['a', 'b', 'c']) expect(await backend.release(keys, token)).toBe(true);
        expect(await backend.isLocked(keys)).toBe(false);
      } finally {
        await backend.close();
      }
    },
  );
});

/** The backend a LockService runs on (its engine's), to tell its commands from another's. */
function backendOf(service: object): unknown {
  const engine = (service as { engine: { backend: unknown } }).engine;
  return engine.backend;
}
