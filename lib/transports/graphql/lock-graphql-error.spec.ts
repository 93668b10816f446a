import { IntrinsicException } from '@nestjs/common';
import { GraphQLError, locatedError } from 'graphql';
import {
  LockKeyError,
  LockLostError,
  LockNotAcquiredError,
  LockServiceClosedError,
  RedisCommandError,
  RedisUnavailableError,
} from '../../errors/errors';
import { LockGraphQLError, toLockGraphQLError } from './lock-graphql-error';

const busy = new LockNotAcquiredError('order:alice@example.com', 0, 29_000);
const refused = new RedisCommandError('Redis refused acquire: WRONGTYPE …', 'WRONGTYPE');
const lost = new LockLostError('job:alice', 'not-owner');

describe('toLockGraphQLError, safe (the default)', () => {
  it.each([
    ['busy', busy, { code: 'LOCK_BUSY', retryAfterMs: 1_000 }],
    ['lost', lost, { code: 'LOCK_LOST' }],
    [
      'Redis out of reach',
      new RedisUnavailableError('Redis did not answer'),
      { code: 'LOCK_UNAVAILABLE' },
    ],
    ['Redis refusing', refused, { code: 'LOCK_UNAVAILABLE' }],
    ['shutting down', new LockServiceClosedError('shutting down'), { code: 'LOCK_UNAVAILABLE' }],
    ['a bad key', new LockKeyError('Lock key template "a:<x>": …'), { code: 'BAD_USER_INPUT' }],
  ])('%s: a stable code and nothing else', (_what, error, extensions) => {
    const answer = toLockGraphQLError(error);
    expect(answer.extensions).toEqual(extensions);
    expect(JSON.stringify(answer)).not.toMatch(/alice|WRONGTYPE|29000|not-owner/);
    expect(answer.message).not.toMatch(/alice|job:|WRONGTYPE|Redis|lock/i);
  });

  it('keeps the failure as a cause that serializing the error leaves out', () => {
    const answer = toLockGraphQLError(busy);
    expect(answer.cause).toBe(busy);
    expect(Object.keys(answer)).not.toContain('cause');
  });

  it("is an IntrinsicException, so Nest's exception logger does not log it again", () => {
    expect(toLockGraphQLError(busy)).toBeInstanceOf(IntrinsicException);
    expect(toLockGraphQLError(busy)).toBeInstanceOf(LockGraphQLError);
  });
});

describe("toLockGraphQLError, errorDetails: 'detailed'", () => {
  it("busy: the error's message, the key, the holder's remaining lease", () => {
    const answer = toLockGraphQLError(busy, 'detailed');
    expect(answer.message).toBe(busy.message);
    expect(answer.extensions).toEqual({
      code: 'LOCK_BUSY',
      key: 'order:alice@example.com',
      retryAfterMs: 29_000,
    });
  });

  it('busy with the lease unknown: the advised wait', () => {
    const answer = toLockGraphQLError(new LockNotAcquiredError('k', 0), 'detailed');
    expect(answer.extensions).toEqual({ code: 'LOCK_BUSY', key: 'k', retryAfterMs: 1_000 });
  });

  it('lost: key and reason; a refusal: the reply code', () => {
    expect(toLockGraphQLError(lost, 'detailed').extensions).toEqual({
      code: 'LOCK_LOST',
      key: 'job:alice',
      reason: 'not-owner',
    });
    expect(toLockGraphQLError(refused, 'detailed').extensions).toEqual({
      code: 'LOCK_UNAVAILABLE',
      replyCode: 'WRONGTYPE',
    });
  });
});

describe('as GraphQL-js answers it', () => {
  it('a thrown LockGraphQLError becomes a GraphQLError with its message and extensions', () => {
    const located = locatedError(toLockGraphQLError(busy), undefined, ['placeOrder']);
    expect(located).toBeInstanceOf(GraphQLError);
    expect(located.toJSON()).toEqual({
      message: 'Another request is working on the same resource. Try again shortly.',
      path: ['placeOrder'],
      extensions: { code: 'LOCK_BUSY', retryAfterMs: 1_000 },
    });
  });
});
