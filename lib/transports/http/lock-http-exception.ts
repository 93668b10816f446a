import { HttpException, type ArgumentsHost } from '@nestjs/common';
import { STATUS_CODES } from 'node:http';
import {
  LockKeyError,
  LockLostError,
  LockNotAcquiredError,
  LockServiceClosedError,
  LockUpgradeError,
  RedisCommandError,
  RedisUnavailableError,
  SemaphoreLimitConflictError,
} from '../../errors/errors';
import type { LockFailure, ResolvedRedisLockOptions } from '../../options/redis-lock-options';
import { failureStatus, publicMessage } from '../shared/lock-failure-answer';
import { RETRY_AFTER_SECONDS } from '../shared/retry-advice';

export function isLockFailure(error: unknown): error is LockFailure {
  return (
    error instanceof LockNotAcquiredError ||
    error instanceof LockKeyError ||
    error instanceof LockLostError ||
    error instanceof RedisUnavailableError ||
    error instanceof RedisCommandError ||
    error instanceof LockServiceClosedError ||
    error instanceof SemaphoreLimitConflictError ||
    error instanceof LockUpgradeError
  );
}

/**
 * The HTTP answer to a lock failure: `Retry-After` on every busy answer whose headers are not sent
 * yet, then the module's `exceptionFactory` when set, else the status of `failureStatus` with a
 * body in Nest's shape — a generic message by default, the error's own message (and, when busy,
 * the key) with `errorDetails: 'detailed'`. Never throws for a response that has started already
 * (an SSE stream whose headers went out while the lock was awaited): Nest then answers with an
 * error event carrying the body's message.
 */
export function toLockHttpException(
  error: LockFailure,
  host: ArgumentsHost,
  options: ResolvedRedisLockOptions,
): unknown {
  if (error instanceof LockNotAcquiredError) {
    setHeader(host.switchToHttp().getResponse(), 'Retry-After', String(RETRY_AFTER_SECONDS));
  }
  if (options.exceptionFactory) return options.exceptionFactory(error, host);
  const status = failureStatus(error, options.busyStatus);
  const body: Record<string, unknown> = {
    statusCode: status,
    error: STATUS_CODES[status] ?? 'Error',
    message: options.errorDetails === 'detailed' ? error.message : publicMessage(error),
  };
  if (options.errorDetails === 'detailed' && error instanceof LockNotAcquiredError) {
    body.resource = error.key;
    body.retryAfter = RETRY_AFTER_SECONDS;
    body.retryAfterMs = error.retryAfterMs;
  }
  return new HttpException(body, status, { cause: error });
}

interface AnyResponse {
  setHeader?: (n: string, v: string) => void;
  header?: (n: string, v: string) => void;
  /** Node's `ServerResponse` (Express). */
  headersSent?: boolean;
  /** Fastify's reply: `sent`, and the Node response as `raw`. */
  sent?: boolean;
  raw?: { headersSent?: boolean };
}

/**
 * Whether the response's headers went out already (Express or Fastify): setting a header then
 * throws `ERR_HTTP_HEADERS_SENT`, and no status can be sent any more.
 */
export function headersSent(response: unknown): boolean {
  const target = response as AnyResponse | undefined;
  return target?.headersSent === true || target?.sent === true || target?.raw?.headersSent === true;
}

/** Express (`setHeader`) and Fastify (`header`) responses; a no-op once headers are sent. */
function setHeader(response: unknown, name: string, value: string): void {
  if (headersSent(response)) return;
  const target = response as AnyResponse;
  if (typeof target.setHeader === 'function') target.setHeader(name, value);
  else if (typeof target.header === 'function') target.header(name, value);
}
