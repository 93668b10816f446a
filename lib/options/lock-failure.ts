import type { ArgumentsHost } from '@nestjs/common';
import type {
  LockKeyError,
  LockLostError,
  LockNotAcquiredError,
  LockServiceClosedError,
  LockUpgradeError,
  RedisCommandError,
  RedisUnavailableError,
  SemaphoreLimitConflictError,
} from '../errors/errors';

/**
 * A lock failure on a route: busy, bad key, lost while running, Redis out of reach or refusing,
 * the service shutting down, or a semaphore held under another limit (a rollout of a new
 * `permits`: its message names the key, so callers get the generic "unavailable" answer), or a
 * write nested in a read of the same key (a bug in the handler: a generic 500 answer; its message
 * names the key, with the request's values in it, so it goes to the log only).
 */
export type LockFailure =
  | LockNotAcquiredError
  | LockKeyError
  | LockLostError
  | RedisUnavailableError
  | RedisCommandError
  | LockServiceClosedError
  | SemaphoreLimitConflictError
  | LockUpgradeError;

/**
 * Turns a lock failure on an HTTP request into the exception Nest should send. Receives the
 * route's `ExecutionContext` (from `@Locked` routes) or the filter's `ArgumentsHost` (from
 * `LockExceptionFilter`); both have `switchToHttp()`. `Retry-After` is already set on busy answers.
 */
export type LockExceptionFactory = (error: LockFailure, host: ArgumentsHost) => unknown;
