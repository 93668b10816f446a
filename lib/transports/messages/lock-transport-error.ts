import { LockLostError, LockNotAcquiredError, RedisCommandError } from '../../errors/errors';
import { publicMessage } from '../shared/lock-failure-answer';
import type { LockErrorDetails, LockFailure } from '../../options/redis-lock-options';

/**
 * What a microservice or WebSocket caller receives for a lock failure: plain data, since an Error
 * does not survive serialization. `error` is the class name, so callers can tell "busy, retry"
 * (`LockNotAcquiredError`) from a bad payload (`LockKeyError`) or an outage. By default `message`
 * is generic and nothing else is sent; the other fields come with `errorDetails: 'detailed'`.
 */
export interface LockTransportError {
  status: 'error';
  error: string;
  message: string;
  /** With `errorDetails: 'detailed'`: the lock key, for a busy or lost lock. */
  key?: string;
  /**
   * With `errorDetails: 'detailed'`, for a busy lock: the holder's remaining lease (ms), an upper
   * bound on when to retry.
   */
  retryAfterMs?: number;
  /** With `errorDetails: 'detailed'`, for a lost lock: `'not-owner'`, `'deadline'` or `'shutdown'`. */
  reason?: string;
  /** With `errorDetails: 'detailed'`, for a Redis refusal: the reply's code (`WRONGTYPE`, …). */
  code?: string;
}

export function toLockTransportError(
  error: LockFailure,
  details: LockErrorDetails = 'safe',
): LockTransportError {
  if (details === 'safe') {
    return { status: 'error', error: error.name, message: publicMessage(error) };
  }
  const data: LockTransportError = { status: 'error', error: error.name, message: error.message };
  if (error instanceof LockNotAcquiredError) {
    data.key = error.key;
    if (error.retryAfterMs !== undefined) data.retryAfterMs = error.retryAfterMs;
  } else if (error instanceof LockLostError) {
    data.key = error.key;
    data.reason = error.reason;
  } else if (error instanceof RedisCommandError) {
    data.code = error.code;
  }
  // LockKeyError, RedisUnavailableError, LockServiceClosedError: the message says it all.
  return data;
}

type TransportExceptionClass = new (error: object) => Error;

/**
 * The lock failure as the transport's own exception (`RpcException`, `WsException`), which Nest's
 * default filters send to the caller as is — any other error becomes "Internal server error" and
 * an error log line. Loaded lazily: those packages are installed exactly when such a handler runs,
 * and they are not dependencies of this library. Without them, the error is returned unchanged.
 */
export function toTransportException(
  error: LockFailure,
  type: 'rpc' | 'ws',
  details: LockErrorDetails,
): unknown {
  const Exception =
    type === 'rpc'
      ? optionalExport('@nestjs/microservices', 'RpcException')
      : optionalExport('@nestjs/websockets', 'WsException');
  return Exception ? new Exception(toLockTransportError(error, details)) : error;
}

function optionalExport(pkg: string, name: string): TransportExceptionClass | undefined {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- optional peer, loaded on use
    return (require(pkg) as Record<string, TransportExceptionClass | undefined>)[name];
  } catch {
    return undefined;
  }
}
