import * as common from '@nestjs/common';
import {
  LockKeyError,
  LockLostError,
  LockNotAcquiredError,
  LockUpgradeError,
  RedisCommandError,
} from '../../errors/errors';
import type { LockErrorDetails, LockFailure } from '../../options/redis-lock-options';
import { RETRY_AFTER_MS } from '../shared/retry-advice';
import { publicMessage } from '../shared/lock-failure-answer';

/**
 * The `extensions.code` of a lock failure in a GraphQL answer: `LOCK_BUSY` (retry later),
 * `LOCK_LOST` (the work ran but its lock was lost: check the outcome before repeating it),
 * `LOCK_UNAVAILABLE` (Redis out of reach or refusing, or the service shutting down), and
 * `BAD_USER_INPUT` (a key part missing or invalid: the caller's input), Apollo's own code for it.
 */
export type LockGraphQLErrorCode =
  'LOCK_BUSY' | 'LOCK_LOST' | 'LOCK_UNAVAILABLE' | 'BAD_USER_INPUT' | 'INTERNAL_SERVER_ERROR';

/** What a lock failure's GraphQL error carries in `extensions`. */
export interface LockGraphQLErrorExtensions {
  code: LockGraphQLErrorCode;
  /**
   * For `LOCK_BUSY`: when to retry, in ms — by default the advised wait (1 s, as HTTP's
   * `Retry-After`); with `errorDetails: 'detailed'`, the holder's remaining lease (an upper bound)
   * when known, as the other transports' detailed answers report it.
   */
  retryAfterMs?: number;
  /** With `errorDetails: 'detailed'`: the lock key, for a busy or lost lock. */
  key?: string;
  /** With `errorDetails: 'detailed'`, for a lost lock: `'not-owner'`, `'deadline'` or `'shutdown'`. */
  reason?: string;
  /** With `errorDetails: 'detailed'`, for a Redis refusal: the reply's code (`WRONGTYPE`, …). */
  replyCode?: string;
}

/**
 * Nest 11 and later log every error a resolver throws except these (a lock failure is logged
 * once, at its own level, before it is answered); on Nest 10, which lacks it, a plain Error.
 */
const QuietError: new (message: string) => Error =
  (common as { IntrinsicException?: new (message: string) => Error }).IntrinsicException ?? Error;

/**
 * A lock failure as a GraphQL resolver answers it. GraphQL-js turns any error a resolver throws
 * into a `GraphQLError` with that error's message and `extensions`, so this needs no import of
 * `graphql`, and the library loads where GraphQL is not installed. The message is generic and the
 * extensions hold only `code` (and `retryAfterMs` when busy) unless `errorDetails` is
 * `'detailed'`: no key, no Redis reply. The failure itself is kept as `cause`, for the log.
 */
export class LockGraphQLError extends QuietError {
  override readonly name = 'LockGraphQLError';

  constructor(
    message: string,
    readonly extensions: LockGraphQLErrorExtensions,
    cause?: LockFailure,
  ) {
    super(message);
    // Not enumerable: nothing that serializes the error (a formatError) sends the failure along.
    Object.defineProperty(this, 'cause', { value: cause, enumerable: false, configurable: true });
  }
}

/** The GraphQL error for a lock failure, safe by default (see {@link LockGraphQLError}). */
export function toLockGraphQLError(
  error: LockFailure,
  details: LockErrorDetails = 'safe',
): LockGraphQLError {
  const detailed = details === 'detailed';
  const message = detailed ? error.message : publicMessage(error);
  const extensions: LockGraphQLErrorExtensions = { code: graphQLCode(error) };
  if (error instanceof LockNotAcquiredError) {
    extensions.retryAfterMs = (detailed ? error.retryAfterMs : undefined) ?? RETRY_AFTER_MS;
  }
  if (detailed) {
    if (error instanceof LockNotAcquiredError) extensions.key = error.key;
    if (error instanceof LockLostError)
      Object.assign(extensions, { key: error.key, reason: error.reason });
    if (error instanceof RedisCommandError) extensions.replyCode = error.code;
  }
  return new LockGraphQLError(message, extensions, error);
}

export function graphQLCode(error: LockFailure): LockGraphQLErrorCode {
  if (error instanceof LockNotAcquiredError) return 'LOCK_BUSY';
  if (error instanceof LockLostError) return 'LOCK_LOST';
  if (error instanceof LockKeyError) return 'BAD_USER_INPUT';
  if (error instanceof LockUpgradeError) return 'INTERNAL_SERVER_ERROR'; // a bug in the handler
  // RedisUnavailableError, RedisCommandError, LockServiceClosedError, SemaphoreLimitConflictError
  return 'LOCK_UNAVAILABLE';
}
