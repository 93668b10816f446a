import {
  BadRequestException,
  HttpException,
  InternalServerErrorException,
  ServiceUnavailableException,
  type ArgumentsHost,
} from '@nestjs/common';
import { LockKeyError } from '../errors/lock-key.error';
import { LockLostError } from '../errors/lock-lost.error';
import { LockNotAcquiredError } from '../errors/lock-not-acquired.error';
import { LockServiceClosedError } from '../errors/lock-service-closed.error';
import { RedisCommandError } from '../errors/redis-command.error';
import { RedisUnavailableError } from '../errors/redis-unavailable.error';
import type { LockFailure, ResolvedRedisLockOptions } from '../module/redis-lock-options';

/**
 * Seconds a client is told to wait on a busy lock. The holder's PTTL is only an upper bound (a
 * renewed lease always shows about `ttl`) and most locked work is short, so advise the smallest
 * value and report the bound in the body as `lockExpiresInMs`.
 */
const RETRY_AFTER_SECONDS = 1;

export function isLockFailure(error: unknown): error is LockFailure {
  return (
    error instanceof LockNotAcquiredError ||
    error instanceof LockKeyError ||
    error instanceof LockLostError ||
    error instanceof RedisUnavailableError ||
    error instanceof RedisCommandError ||
    error instanceof LockServiceClosedError
  );
}

/**
 * The HTTP answer to a lock failure: `Retry-After` on every busy answer whose headers are not sent
 * yet, then the module's `exceptionFactory` when set, else 409 (`busyStatus`) with a JSON body
 * naming the resource, 400 for a bad key, 500 when Redis refuses the command, 503 for a lost lock,
 * an unreachable Redis or a service shutting down. Never throws for a response that has started
 * already (an SSE stream whose headers went out while the lock was awaited): Nest then answers
 * with an error event.
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
  if (error instanceof LockNotAcquiredError) {
    return new HttpException(
      {
        statusCode: options.busyStatus,
        error: 'Conflict',
        message: error.message,
        resource: error.key,
        retryAfter: RETRY_AFTER_SECONDS,
        lockExpiresInMs: error.retryAfterMs,
      },
      options.busyStatus,
      { cause: error },
    );
  }
  if (error instanceof LockKeyError)
    return new BadRequestException(error.message, { cause: error });
  // Redis refusing the command (a foreign key type, an ACL) is a server fault: retrying won't help.
  if (error instanceof RedisCommandError)
    return new InternalServerErrorException(error.message, { cause: error });
  return new ServiceUnavailableException(error.message, { cause: error });
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
