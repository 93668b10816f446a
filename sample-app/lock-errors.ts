import { HttpStatus } from '@nestjs/common';
import {
  LockKeyError,
  LockLostError,
  LockNotAcquiredError,
  type LockExceptionFactory,
  type LockFailure,
} from 'nestjs-redis-lock';
import { ShopRefusal } from './shop.errors';

/**
 * The shop's shape for every lock failure (`exceptionFactory` option), whichever way it surfaces:
 * on a `@Locked` route the library's interceptor calls it; from a `@Locked` provider method or a
 * `withLock`, the library's `LockExceptionFilter` does. The library has already set `Retry-After`
 * and logged the detail (key, Redis reply); the bodies here say only what a shopper can act on.
 * Busy → 409 `reason: 'busy'`; bad key → 400; Redis out of reach or refusing → 503; a lock lost
 * after the order ran → 500, since the order may have been placed: the client checks before it
 * orders again.
 */
export const lockExceptionFactory: LockExceptionFactory = (error: LockFailure) => {
  if (error instanceof LockNotAcquiredError) {
    return new ShopRefusal(
      HttpStatus.CONFLICT,
      'Conflict',
      'busy',
      'A request for the same thing is already being handled. Try again in a second.',
    );
  }
  if (error instanceof LockKeyError) {
    return new ShopRefusal(
      HttpStatus.BAD_REQUEST,
      'Bad Request',
      'invalid-request',
      'The request is missing a value, or a value is invalid.',
    );
  }
  if (error instanceof LockLostError) {
    return new ShopRefusal(
      HttpStatus.INTERNAL_SERVER_ERROR,
      'Internal Server Error',
      'lock-lost',
      'Your order may or may not have been placed. Check your orders before trying again.',
    );
  }
  return new ShopRefusal(
    HttpStatus.SERVICE_UNAVAILABLE,
    'Service Unavailable',
    'redis-unavailable',
    'The shop is temporarily unavailable. Try again later.',
  );
};
