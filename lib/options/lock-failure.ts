import type { ArgumentsHost } from '@nestjs/common';
import type { LockKeyError } from '../errors/lock-key.error';
import type { LockLostError } from '../errors/lock-lost.error';
import type { LockNotAcquiredError } from '../errors/lock-not-acquired.error';
import type { LockServiceClosedError } from '../errors/lock-service-closed.error';
import type { RedisCommandError } from '../errors/redis-command.error';
import type { RedisUnavailableError } from '../errors/redis-unavailable.error';
import type { SemaphoreLimitConflictError } from '../errors/semaphore-limit-conflict.error';

/**
 * A lock failure on a route: busy, bad key, lost while running, Redis out of reach or refusing,
 * the service shutting down, or a semaphore held under another limit (a rollout of a new
 * `permits`: its message names the key, so callers get the generic "unavailable" answer).
 */
export type LockFailure =
  | LockNotAcquiredError
  | LockKeyError
  | LockLostError
  | RedisUnavailableError
  | RedisCommandError
  | LockServiceClosedError
  | SemaphoreLimitConflictError;

/**
 * Turns a lock failure on an HTTP request into the exception Nest should send. Receives the
 * route's `ExecutionContext` (from `@Locked` routes) or the filter's `ArgumentsHost` (from
 * `LockExceptionFilter`); both have `switchToHttp()`. `Retry-After` is already set on busy answers.
 */
export type LockExceptionFactory = (error: LockFailure, host: ArgumentsHost) => unknown;
