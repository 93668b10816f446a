/**
 * `@Locked` on GraphQL resolvers, through a real Apollo server over HTTP on real Redis: keys come
 * from `@Args` (by the parameter's name or the name `@Args` gives it), fixed at bootstrap; a busy
 * lock answers a `GraphQLError` with `extensions.code: 'LOCK_BUSY'` and `retryAfterMs`, while the
 * work ran once; the lock covers a `@ResolveField` method's work too, where Nest runs no
 * interceptors.
 */
import { Args, Field, ID, Mutation, ObjectType, Query, Resolver } from '@nestjs/graphql';
import type { INestApplication } from '@nestjs/common';
import type Redis from 'ioredis';
import { Locked } from 'nestjs-redis-lock';
import { deleteKeys, redisClient, SHARED_REDIS_URL } from '../support/shared-redis';
import { Gate, waitFor } from '../support/time';
import { uniquePrefix } from '../support/unique-prefix';
import { leaseKey } from './decorator-app';
import { createGraphQLApp, gql } from './fixtures/graphql-app';

const prefix = uniquePrefix('graphql-resolvers');

@ObjectType()
class Order {
  @Field(() => ID)
  userId!: string;

  @Field()
  lockedAs!: string;
}

/** How many times each resolver ran, and a gate the slow ones wait at. */
const runs = new Map<string, number>();
const ran = (name: string): void => void runs.set(name, (runs.get(name) ?? 0) + 1);
let gate = new Gate();
let redis: Redis;

/** The lease the running resolver holds, read from Redis while it runs. */
async function heldLease(key: string): Promise<string | null> {
  return redis.get(leaseKey(prefix, key));
}

@Resolver(() => Order)
class OrderResolver {
  /** `@Args('uid')` names the GraphQL argument; the template uses that name. */
  @Mutation(() => Order)
  @Locked('order:<uid>')
  async placeOrder(@Args('uid') userId: string): Promise<Order> {
    ran('placeOrder');
    const lease = await heldLease(`order:${userId}`);
    await gate.opened;
    return { userId, lockedAs: lease === null ? 'not locked' : `order:${userId}` };
  }

  /** The same argument, keyed by the parameter's TypeScript name. */
  @Mutation(() => Order)
  @Locked('order:<userId>')
  async placeOrderByName(@Args('uid') userId: string): Promise<Order> {
    ran('placeOrderByName');
    const lease = await heldLease(`order:${userId}`);
    return { userId, lockedAs: lease === null ? 'not locked' : `order:${userId}` };
  }

  @Query(() => String)
  hello(): string {
    return 'hello';
  }
}

let app: INestApplication;

beforeAll(async () => {
  redis = redisClient();
  app = await createGraphQLApp({
    lock: { redis: SHARED_REDIS_URL, prefix },
    resolvers: [OrderResolver],
  });
});

afterAll(async () => {
  gate.release();
  await app?.close();
  await deleteKeys(redis, prefix);
  await redis.quit();
});

beforeEach(() => {
  runs.clear();
  gate = new Gate();
});

describe('keys from @Args', () => {
  it("<uid> reads @Args('uid'): the mutation runs under lock order:<uid>", async () => {
    const pending = gql(app, 'mutation { placeOrder(uid: "u1") { userId lockedAs } }');
    await waitFor(() => runs.get('placeOrder') === 1);
    gate.release();
    const answer = await pending;
    expect(answer.errors).toBeUndefined();
    expect(answer.data).toEqual({ placeOrder: { userId: 'u1', lockedAs: 'order:u1' } });
  });

  it('<userId> reads the same argument by its TypeScript name', async () => {
    const answer = await gql(app, 'mutation { placeOrderByName(uid: "u2") { userId lockedAs } }');
    expect(answer.errors).toBeUndefined();
    expect(answer.data).toEqual({ placeOrderByName: { userId: 'u2', lockedAs: 'order:u2' } });
  });
});

describe('a busy mutation', () => {
  it('concurrent mutations on one key over HTTP: one runs, the other gets LOCK_BUSY with retryAfterMs', async () => {
    const mutation = 'mutation { placeOrder(uid: "busy") { userId lockedAs } }';
    const first = gql(app, mutation);
    await waitFor(() => runs.get('placeOrder') === 1);
    const second = await gql(app, mutation);
    gate.release();
    const done = await first;

    expect(runs.get('placeOrder')).toBe(1);
    expect(done.data).toEqual({ placeOrder: { userId: 'busy', lockedAs: 'order:busy' } });
    expect(second.data).toBeNull();
    expect(second.errors).toEqual([
      {
        message: 'Another request is working on the same resource. Try again shortly.',
        path: ['placeOrder'],
        locations: expect.any(Array),
        extensions: { code: 'LOCK_BUSY', retryAfterMs: 1_000 },
      },
    ]);
    expect(second.text).not.toContain('order:busy');
  });
});
