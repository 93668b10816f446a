/**
 * Review finding: a write nested in a read of the same chain (LockUpgradeError) in a @Locked
 * GraphQL resolver — what does the client see? Its message names the key, with request values.
 */
import { Logger, type INestApplication } from '@nestjs/common';
import { Args, Mutation, Query, Resolver } from '@nestjs/graphql';
import { APP_FILTER } from '@nestjs/core';
import { LockExceptionFilter, LockService, Locked } from 'nestjs-redis-lock';
import { onSharedRedis } from '../support/lock-services';
import { SHARED_REDIS_URL } from '../support/shared-redis';
import { createGraphQLApp, gql } from '../decorator/fixtures/graphql-app';

const { prefix } = onSharedRedis('rw-graphql-review');

@Resolver()
class DocResolver {
  constructor(private readonly locks: LockService) {}

  /** A schema needs a query. */
  @Query(() => String)
  ping(): string {
    return 'pong';
  }

  @Mutation(() => String)
  @Locked('doc:<id>', { mode: 'read' })
  async touch(@Args('id') id: string): Promise<string> {
    return this.locks.withLock(`doc:${id}`, () => id); // a write inside the read: refused
  }
}

describe('what a client is told of a write nested in a read', () => {
  let app: INestApplication;
  beforeAll(async () => {
    jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    app = await createGraphQLApp({
      lock: { redis: SHARED_REDIS_URL, prefix },
      resolvers: [DocResolver],
      // The documented answer to lock errors thrown from a handler's own calls.
      providers: [{ provide: APP_FILTER, useClass: LockExceptionFilter }],
    });
  });
  afterAll(() => app?.close());

  it('answers a GraphQL call with a generic error: no key, no request value', async () => {
    const answer = await gql(app, 'mutation { touch(id: "alice@example.com") }');
    expect(answer.errors).toHaveLength(1);
    // Before the fix: 'Lock "doc:alice@example.com" is held for reading by this call chain…'
    expect(answer.text).not.toContain('alice');
    expect(answer.errors![0]!.message).toBe('The server could not process the request.');
    expect(answer.errors![0]!.extensions).toMatchObject({ code: 'INTERNAL_SERVER_ERROR' });
  });
});
