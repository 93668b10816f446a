import { HttpException, Logger, type ArgumentsHost, type LogLevel } from '@nestjs/common';
import {
  LockKeyError,
  LockLostError,
  LockNotAcquiredError,
  LockServiceClosedError,
  LockUpgradeError,
} from '../../errors/errors';
import { failureAnswered, publicMessages } from '../../errors/messages';
import type { BusyLogLevel, LockFailure } from '../../options/redis-lock-options';

const logger = new Logger('RedisLock');

/**
 * The HTTP status of a lock failure, whatever `errorDetails` says: `busyStatus` (409) when busy,
 * 400 for a bad key, 503 when Redis is out of reach or refuses the command, or the service is
 * shutting down (the client is not at fault and may retry later), 500 for a lock lost while the
 * work ran. The work may have committed
 * then: 503 would tell clients and proxies that nothing happened and invite a blind retry of a
 * non-idempotent request; 500 says only that the outcome is unknown.
 */
export function failureStatus(error: LockFailure, busyStatus: number): number {
  if (error instanceof LockNotAcquiredError) return busyStatus;
  if (error instanceof LockKeyError) return 400;
  if (error instanceof LockLostError || error instanceof LockUpgradeError) return 500;
  return 503; // RedisUnavailableError, RedisCommandError, LockServiceClosedError, a limit conflict
}

/** The generic message callers get by default: no key, no Redis reply, no advice. */
export function publicMessage(error: LockFailure): string {
  if (error instanceof LockNotAcquiredError) return publicMessages.busy();
  if (error instanceof LockKeyError) return publicMessages.badRequest();
  if (error instanceof LockLostError) return publicMessages.outcomeUnknown();
  if (error instanceof LockUpgradeError) return publicMessages.serverError();
  return publicMessages.unavailable();
}

/**
 * Logs what an answer to a lock failure leaves out (key, Redis reply, advice), once per answered
 * failure. Busy is routine contention (`busyLevel`: the module's `busyLogLevel`, `false` for no
 * line); a bad key is the caller's input or a key template to fix, a refusal during shutdown is
 * expected (warn); an outage, a refusal by Redis or a lost lock needs an operator (error).
 */
export function logLockFailure(
  error: LockFailure,
  where: string,
  answer: string,
  busyLevel: BusyLogLevel,
): void {
  const level: LogLevel | false =
    error instanceof LockNotAcquiredError
      ? busyLevel
      : error instanceof LockKeyError || error instanceof LockServiceClosedError
        ? 'warn'
        : 'error';
  if (level) logger[level](failureAnswered(where, answer, error));
}

/**
 * Names the handler for the log line, without request values: `Class.method` from an
 * interceptor's `ExecutionContext`; from a filter's `ArgumentsHost` (which Nest builds without
 * the handler), the route's pattern (`POST /orders/:id`), a GraphQL field (`GraphQL
 * Mutation.placeOrder`), or `'A gateway handler'`.
 */
export function handlerName(host: ArgumentsHost): string {
  const context = host as Partial<{ getClass(): unknown; getHandler(): unknown }>;
  const type = context.getClass?.();
  const handler = context.getHandler?.();
  if (typeof type === 'function' && typeof handler === 'function') {
    return `${type.name}.${handler.name}`;
  }
  const kind = host.getType<string>();
  if (kind === 'graphql') {
    // A resolver's arguments are (parent, args, context, info): info names the field.
    const info = host.getArgByIndex<{ parentType?: { name?: unknown }; fieldName?: unknown }>(3);
    const field = `${String(info?.parentType?.name)}.${String(info?.fieldName)}`;
    return info?.fieldName === undefined ? 'A GraphQL resolver' : `GraphQL ${field}`;
  }
  if (kind !== 'http') return kind === 'ws' ? 'A gateway handler' : 'A microservice handler';
  const request = host.switchToHttp().getRequest<RouteOfRequest>();
  // Express keeps the matched route on `route`, Fastify on `routeOptions` (before 4.10,
  // `routerPath`).
  const route = request.route?.path ?? request.routeOptions?.url ?? request.routerPath;
  return `${request.method ?? 'A'} ${typeof route === 'string' ? route : 'request'}`;
}

interface RouteOfRequest {
  method?: string;
  route?: { path?: unknown };
  routeOptions?: { url?: unknown };
  routerPath?: unknown;
}

/**
 * How an HTTP exception built for a lock failure answers, for the log line: `409`, `503`, … or,
 * once the response has started (an SSE stream), the error event Nest sends instead.
 */
export function httpAnswer(exception: unknown, started = false): string {
  if (started) return 'with an error event (the response had started)';
  if (exception instanceof HttpException) return String(exception.getStatus());
  return `500 (the exception factory returned ${describe(exception)}, not an HttpException)`;
}

function describe(value: unknown): string {
  return value instanceof Error ? value.name : typeof value;
}
