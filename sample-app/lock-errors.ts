import { HttpStatus } from '@nestjs/common';
import {
  LockKeyError,
  LockLostError,
  LockNotAcquiredError,
  type LockExceptionFactory,
  type LockFailure,
} from 'nestjs-redis-lock';
import { ShopRefusal } from './shop.errors';

/** Seconds a client should wait before retrying a busy lock: locked work here takes milliseconds. */
const RETRY_AFTER_SECONDS = 1;

/**
 * The shop's shape for every lock failure (`exceptionFactory` option), whichever way it surfaces:
 * on a `@Locked` route the library's interceptor calls it; from a `@Locked` provider method or a
 * `withLock`, the library's `LockExceptionFilter` does. The library has already set `Retry-After`.
 * Busy → 409 `reason: 'busy'`; bad key → 400; lost or Redis unreachable → 503.
 */
export const lockExceptionFactory: LockExceptionFactory = (error: LockFailure) => {
  if (error instanceof LockNotAcquiredError) {
    return new ShopRefusal(HttpStatus.CONFLICT, 'Conflict', 'busy', error.message, {
      resource: error.key,
      retryAfter: RETRY_AFTER_SECONDS,
    });
  }
  if (error instanceof LockKeyError) {
    return new ShopRefusal(HttpStatus.BAD_REQUEST, 'Bad Request', 'invalid-request', error.message);
  }
  if (error instanceof LockLostError) {
    return new ShopRefusal(
      HttpStatus.SERVICE_UNAVAILABLE,
      'Service Unavailable',
      'lock-lost',
      error.message,
    );
  }
  return new ShopRefusal(
    HttpStatus.SERVICE_UNAVAILABLE,
    'Service Unavailable',
    'redis-unavailable',
    error.message,
  );
};
