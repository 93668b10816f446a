/**
 * `@Locked` on GraphQL resolvers, through a real Apollo server over HTTP on real Redis: keys come
 * from `@Args` (by the parameter's name or the name `@Args` gives it), fixed at bootstrap; a busy
 * lock answers a `GraphQLError` with `extensions.code: 'LOCK_BUSY'` and `retryAfterMs`, while the
 * work ran once; the lock covers a `@ResolveField` method's work too, where Nest runs no
 * interceptors.
 */
import { Injectable, Scope, type INestApplication, type Type } from '@nestjs/common';
import {
  Args,
  ArgsType,
  Field,
  ID,
  InputType,
  Int,
  Mutation,
  ObjectType,
  Parent,
  Query,
  ResolveField,
  Resolver,
  Subscription,
} from '@nestjs/graphql';
import { Test } from '@nestjs/testing';
import type Redis from 'ioredis';
import { Locked, RedisLockConfigError, RedisLockModule } from 'nestjs-redis-lock';
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

@ObjectType()
class Account {
  @Field(() => ID)
  id!: string;
}

@InputType()
class OrderInput {
  @Field()
  userId!: string;

  @Field()
  item!: string;
}

@ArgsType()
class CancelArgs {
  @Field()
  userId!: string;
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
    // Taken before the first await: the test releases (and re-arms) the gate once it sees the run.
    const opened = gate.opened;
    ran('placeOrder');
    const lease = await heldLease(`order:${userId}`);
    await opened;
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

  /** A nullable argument: left out, the key has no value. */
  @Mutation(() => Order)
  @Locked('order:<uid>')
  async placeOrderMaybe(
    @Args('uid', { type: () => String, nullable: true }) uid?: string,
  ): Promise<Order> {
    return { userId: String(uid), lockedAs: 'unreachable' };
  }

  /** Skipped when busy: answers null without running. */
  @Mutation(() => Order, { nullable: true })
  @Locked('order:<uid>', { onBusy: 'skip' })
  async placeOrderOnce(@Args('uid') userId: string): Promise<Order> {
    ran('placeOrderOnce');
    return { userId, lockedAs: `order:${userId}` };
  }

  /** A dotted path into a named input object. */
  @Mutation(() => Order)
  @Locked('order:<input.userId>')
  async placeOrderInput(@Args('input') input: OrderInput): Promise<Order> {
    const lease = await heldLease(`order:${input.userId}`);
    return {
      userId: input.userId,
      lockedAs: lease === null ? 'not locked' : `order:${input.userId}`,
    };
  }

  /** A dotted path into `@Args()` without a name: an `@ArgsType` class, the operation's arguments. */
  @Mutation(() => Order)
  @Locked('order:<args.userId>')
  async cancelOrder(@Args() args: CancelArgs): Promise<Order> {
    const lease = await heldLease(`order:${args.userId}`);
    return {
      userId: args.userId,
      lockedAs: lease === null ? 'not locked' : `order:${args.userId}`,
    };
  }
}

@Resolver(() => Account)
class AccountResolver {
  @Query(() => Account)
  @Locked('account:<id>')
  async account(@Args('id', { type: () => ID }) id: string): Promise<Account> {
    ran('account');
    await gate.opened;
    return { id };
  }

  /** Nest runs no interceptors for field resolvers here: `@Locked` locks it by itself. */
  @ResolveField(() => Int, { nullable: true })
  @Locked('balance:<account.id>')
  async balance(@Parent() account: Account): Promise<number> {
    const opened = fieldGate.opened; // before the first await, as in placeOrder
    ran('balance');
    const lease = await heldLease(`balance:${account.id}`);
    await opened;
    return lease === null ? -1 : 100;
  }
}

/** Field resolvers wait here (not at `gate`, which the account query uses). */
let fieldGate = new Gate();

let app: INestApplication;

beforeAll(async () => {
  redis = redisClient();
  app = await createGraphQLApp({
    lock: { redis: SHARED_REDIS_URL, prefix },
    resolvers: [OrderResolver, AccountResolver],
  });
});

afterAll(async () => {
  gate.release();
  fieldGate.release();
  await app?.close();
  await deleteKeys(redis, prefix);
  await redis.quit();
});

beforeEach(() => {
  runs.clear();
  gate = new Gate();
  fieldGate = new Gate();
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

describe('dotted paths into @Args objects', () => {
  it("<input.userId> reads a field of @Args('input')", async () => {
    const answer = await gql(
      app,
      'mutation { placeOrderInput(input: { userId: "u3", item: "tea" }) { userId lockedAs } }',
    );
    expect(answer.errors).toBeUndefined();
    expect(answer.data).toEqual({ placeOrderInput: { userId: 'u3', lockedAs: 'order:u3' } });
  });

  it('<args.userId> reads a field of @Args() (an @ArgsType class)', async () => {
    const answer = await gql(app, 'mutation { cancelOrder(userId: "u4") { userId lockedAs } }');
    expect(answer.errors).toBeUndefined();
    expect(answer.data).toEqual({ cancelOrder: { userId: 'u4', lockedAs: 'order:u4' } });
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

describe('many concurrent mutations on one key', () => {
  it('five at once over HTTP: exactly one runs, the four others get LOCK_BUSY', async () => {
    const mutation = 'mutation { placeOrder(uid: "crowd") { userId lockedAs } }';
    let answered = 0;
    const all = Array.from({ length: 5 }, () =>
      gql(app, mutation).then((answer) => {
        answered += 1;
        return answer;
      }),
    );
    // The one that runs waits at the gate until the four others have their answers.
    await waitFor(() => runs.get('placeOrder') === 1 && answered === 4);
    gate.release();
    const answers = await Promise.all(all);

    expect(runs.get('placeOrder')).toBe(1);
    const ok = answers.filter((answer) => answer.errors === undefined);
    const busy = answers.filter((answer) => answer.errors?.[0]?.extensions?.code === 'LOCK_BUSY');
    expect(ok.map((answer) => answer.data)).toEqual([
      { placeOrder: { userId: 'crowd', lockedAs: 'order:crowd' } },
    ]);
    expect(busy).toHaveLength(4);
    for (const answer of busy) {
      expect(answer.errors![0]!.extensions).toEqual({ code: 'LOCK_BUSY', retryAfterMs: 1_000 });
    }
  });
});

describe('what the key cannot be built from, and skipping', () => {
  it('a left-out nullable argument: BAD_USER_INPUT, nothing locked or run', async () => {
    const answer = await gql(app, 'mutation { placeOrderMaybe { userId } }');
    expect(answer.errors).toEqual([
      expect.objectContaining({
        message: 'The request is missing a value this operation needs, or a value is invalid.',
        path: ['placeOrderMaybe'],
        extensions: { code: 'BAD_USER_INPUT' },
      }),
    ]);
    expect(answer.text).not.toContain('<uid>');
  });

  it("onBusy: 'skip' answers null without running the resolver", async () => {
    const mutation = 'mutation { placeOrder(uid: "skip") { userId } }';
    const first = gql(app, mutation);
    await waitFor(() => runs.get('placeOrder') === 1);
    const skipped = await gql(app, 'mutation { placeOrderOnce(uid: "skip") { userId } }');
    gate.release();
    await first;
    expect(skipped).toMatchObject({ data: { placeOrderOnce: null } });
    expect(skipped.errors).toBeUndefined();
    expect(runs.get('placeOrderOnce')).toBeUndefined();
  });
});

describe('a busy query', () => {
  it('the second query on one key gets LOCK_BUSY; the query ran once', async () => {
    const query = 'query { account(id: "q1") { id } }';
    const first = gql(app, query);
    await waitFor(() => runs.get('account') === 1);
    const second = await gql(app, query);
    gate.release();
    fieldGate.release();
    expect((await first).data).toEqual({ account: { id: 'q1' } });
    expect(runs.get('account')).toBe(1);
    expect(second.errors).toMatchObject([
      { path: ['account'], extensions: { code: 'LOCK_BUSY', retryAfterMs: 1_000 } },
    ]);
  });
});

describe('a locked @ResolveField (no fieldResolverEnhancers)', () => {
  it('runs under its own lock, keyed from @Parent(): busy on one parent, partial data', async () => {
    const query = 'query { account(id: "f1") { id balance } }';
    // The account query itself is locked on account:f1: open its gate, hold the field's.
    const first = gql(app, query);
    await waitFor(() => runs.get('account') === 1);
    gate.release();
    await waitFor(() => runs.get('balance') === 1);
    const second = gql(app, query);
    await waitFor(() => runs.get('account') === 2);
    gate.release();
    const busy = await second;
    fieldGate.release();
    const done = await first;

    expect(done.data).toEqual({ account: { id: 'f1', balance: 100 } });
    expect(runs.get('balance')).toBe(1);
    expect(busy.data).toEqual({ account: { id: 'f1', balance: null } });
    expect(busy.errors).toEqual([
      {
        message: 'Another request is working on the same resource. Try again shortly.',
        path: ['account', 'balance'],
        locations: expect.any(Array),
        extensions: { code: 'LOCK_BUSY', retryAfterMs: 1_000 },
      },
    ]);
    expect(await heldLease('balance:f1')).toBeNull();
  });
});

describe("a locked @ResolveField with fieldResolverEnhancers: ['interceptors']", () => {
  let enhanced: INestApplication;

  beforeAll(async () => {
    enhanced = await createGraphQLApp({
      lock: { redis: SHARED_REDIS_URL, prefix },
      resolvers: [AccountResolver],
      graphql: { fieldResolverEnhancers: ['interceptors'] },
    });
  });

  afterAll(() => enhanced?.close());

  it('the interceptor locks it: the same key, one run, LOCK_BUSY for the other', async () => {
    const query = 'query { account(id: "e1") { id balance } }';
    const first = gql(enhanced, query);
    await waitFor(() => runs.get('account') === 1);
    gate.release();
    await waitFor(() => runs.get('balance') === 1);
    const second = gql(enhanced, query);
    await waitFor(() => runs.get('account') === 2);
    gate.release();
    const busy = await second;
    fieldGate.release();

    expect((await first).data).toEqual({ account: { id: 'e1', balance: 100 } });
    expect(runs.get('balance')).toBe(1);
    expect(busy.data).toEqual({ account: { id: 'e1', balance: null } });
    expect(busy.errors).toMatchObject([
      { path: ['account', 'balance'], extensions: { code: 'LOCK_BUSY', retryAfterMs: 1_000 } },
    ]);
  });
});

/** Starts an app with `resolvers` (no GraphQL server needed) and returns its bootstrap error. */
async function bootError(...resolvers: Type[]): Promise<unknown> {
  const moduleRef = await Test.createTestingModule({
    imports: [RedisLockModule.forRoot({ redis: SHARED_REDIS_URL, prefix: uniquePrefix('boot') })],
    providers: resolvers,
  }).compile();
  const boot = moduleRef.createNestApplication({ logger: false });
  try {
    await boot.init();
    return undefined;
  } catch (error) {
    return error;
  } finally {
    await boot.close();
  }
}

describe('a resolver placeholder that cannot be resolved stops the bootstrap', () => {
  it('a name matching two parameters: one by @Args, one by its TypeScript name', async () => {
    @Resolver()
    class Ambiguous {
      @Mutation(() => Boolean)
      @Locked('x:<userId>')
      async pick(@Args('userId') id: string, @Args('other') userId: string): Promise<boolean> {
        return id !== userId;
      }
    }
    const error = await bootError(Ambiguous);
    expect(error).toBeInstanceOf(RedisLockConfigError);
    expect((error as Error).message).toMatch(
      /Ambiguous\.pick: <userId> matches 2 parameters: id \(@Args\('userId'\)\), userId \(@Args\('other'\)\)/,
    );
  });

  it('a name that matches no parameter (no fallback to the raw GraphQL arguments)', async () => {
    @Resolver()
    class Unknown {
      @Mutation(() => Boolean)
      @Locked('x:<uid>')
      async pick(@Args('userId') id: string): Promise<boolean> {
        return id === '';
      }
    }
    const error = await bootError(Unknown);
    expect(error).toBeInstanceOf(RedisLockConfigError);
    expect((error as Error).message).toContain('<uid> matches no parameter of the resolver');
    expect((error as Error).message).toContain("id (@Args('userId'))");
  });

  it('but not for a field resolver of a request-scoped resolver, which runs under its lock', async () => {
    @Resolver(() => Account)
    @Injectable({ scope: Scope.REQUEST })
    class PerRequest {
      @Query(() => Account)
      async perRequestAccount(@Args('id', { type: () => ID }) id: string): Promise<Account> {
        return { id };
      }

      @ResolveField(() => Int)
      @Locked('balance:<account.id>')
      async balance(@Parent() account: Account): Promise<number> {
        return (await heldLease(`balance:${account.id}`)) === null ? -1 : 100;
      }
    }
    expect(await bootError(PerRequest)).toBeUndefined();
    const scoped = await createGraphQLApp({
      lock: { redis: SHARED_REDIS_URL, prefix },
      resolvers: [PerRequest],
    });
    try {
      const answer = await gql(scoped, 'query { perRequestAccount(id: "r1") { id balance } }');
      expect(answer.errors).toBeUndefined();
      expect(answer.data).toEqual({ perRequestAccount: { id: 'r1', balance: 100 } });
    } finally {
      await scoped.close();
    }
  });

  it('@Locked on a subscription', async () => {
    @Resolver()
    class Feed {
      @Subscription(() => String)
      @Locked('feed')
      async events(): Promise<AsyncIterator<string>> {
        return [][Symbol.iterator]() as unknown as AsyncIterator<string>;
      }
    }
    const error = await bootError(Feed);
    expect(error).toBeInstanceOf(RedisLockConfigError);
    expect((error as Error).message).toContain('Feed.events: a subscription');
  });
});
