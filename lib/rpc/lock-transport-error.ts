import { LockLostError } from '../errors/lock-lost.error';
import { LockNotAcquiredError } from '../errors/lock-not-acquired.error';
import { RedisCommandError } from '../errors/redis-command.error';
import type { LockFailure } from '../module/redis-lock-options';

/**
 * What a microservice or WebSocket caller receives for a lock failure: plain data, since an Error
 * does not survive serialization. `error` is the class name, so callers can tell "busy, retry"
 * (`LockNotAcquiredError`) from a bad payload (`LockKeyError`) or an outage.
 */
export interface LockTransportError {
  status: 'error';
  error: string;
  message: string;
  /** The lock key, for a busy or lost lock. */
  key?: string;
  /** For a busy lock: the holder's remaining lease (ms), an upper bound on when to retry. */
  retryAfterMs?: number;
  /** For a lost lock: `'not-owner'`, `'deadline'` or `'shutdown'`. */
  reason?: string;
  /** For a Redis refusal: the reply's code (`WRONGTYPE`, `NOPERM`, …). */
  code?: string;
}

export function toLockTransportError(error: LockFailure): LockTransportError {
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
export function toTransportException(error: LockFailure, type: 'rpc' | 'ws'): unknown {
  const Exception =
    type === 'rpc'
      ? optionalExport('@nestjs/microservices', 'RpcException')
      : optionalExport('@nestjs/websockets', 'WsException');
  return Exception ? new Exception(toLockTransportError(error)) : error;
}

function optionalExport(pkg: string, name: string): TransportExceptionClass | undefined {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- optional peer, loaded on use
    return (require(pkg) as Record<string, TransportExceptionClass | undefined>)[name];
  } catch {
    return undefined;
  }
}
