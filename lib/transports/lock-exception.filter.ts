import {
  Catch,
  HttpException,
  Injectable,
  Logger,
  Optional,
  type ArgumentsHost,
  type ExceptionFilter,
} from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { throwError, type Observable } from 'rxjs';
import {
  LockKeyError,
  LockLostError,
  LockNotAcquiredError,
  LockServiceClosedError,
  LockUpgradeError,
  RedisCommandError,
  RedisUnavailableError,
  SemaphoreLimitConflictError,
} from '../errors/errors';
import { messages, publicMessages } from '../errors/messages';
import { LockService } from '../service/lock.service';
import type { LockFailure, ResolvedRedisLockOptions } from '../options/redis-lock-options';
import { resolveOptions } from '../options/resolve-options';
import { toLockTransportError } from './messages/lock-transport-error';
import { toLockGraphQLError, type LockGraphQLError } from './graphql/lock-graphql-error';
import { handlerName, httpAnswer, logLockFailure } from './shared/lock-failure-answer';
import { headersSent, toLockHttpException } from './http/lock-http-exception';
import { routeOf } from './http/route-failure-site';

const logger = new Logger('RedisLock');

/**
 * Answers lock failures thrown by services — a busy `@Locked` provider method, a `withLock` — the
 * way `@Locked` handlers answer them, instead of Nest's "Internal server error": on HTTP 409 +
 * `Retry-After`, 400, 500 or 503; to a microservice or WebSocket caller, `LockTransportError`
 * data; to a GraphQL client, a `LockGraphQLError` (`extensions.code`). A failure after a `@Res()`
 * handler started its answer is logged and the answer ended, as no status can be sent then. Opt
 * in app-wide:
 *
 * @example
 * ```ts
 * providers: [{ provide: APP_FILTER, useClass: LockExceptionFilter }]
 * ```
 */
@Catch(
  LockNotAcquiredError,
  LockKeyError,
  LockLostError,
  RedisUnavailableError,
  RedisCommandError,
  LockServiceClosedError,
  SemaphoreLimitConflictError,
  LockUpgradeError,
)
@Injectable()
export class LockExceptionFilter implements ExceptionFilter<LockFailure> {
  constructor(
    private readonly adapterHost: HttpAdapterHost,
    @Optional() private readonly locks?: LockService,
  ) {}

  catch(error: LockFailure, host: ArgumentsHost): Observable<never> | LockGraphQLError | void {
    const type = host.getType<string>();
    // A `@Locked` route Nest called without LockedInterceptor: answered with its own service's
    // options, and named in the log as the interceptor names it.
    const route = routeOf(error);
    const options = route?.options ?? this.locks?.options ?? resolveOptions();
    if (type === 'graphql') {
      // Nest answers a resolver with what its filter returns; GraphQL-js answers a returned error
      // as if it had been thrown, as a GraphQL error with its extensions.
      logLockFailure(error, handlerName(host), 'with a GraphQL error', options.busyLogLevel);
      return toLockGraphQLError(error, options.errorDetails);
    }
    // Microservices send a filter's Observable error to the caller; an Error object would not
    // survive serialization, so the failure goes as data.
    if (type === 'rpc') {
      // The caller of a message gets the data; an event has no caller, so this line is its trace.
      const pattern = host.getArgByIndex<{ getPattern?: () => unknown }>(1)?.getPattern?.();
      // At least a warning even when busy: for an event, the event was dropped.
      const answer = "with LockTransportError data (an event's caller receives nothing)";
      logLockFailure(error, messages.rpcHandler(pattern), answer, 'warn');
      return throwError(() => toLockTransportError(error, options.errorDetails));
    }
    if (type === 'ws') {
      // As Nest's BaseWsExceptionFilter answers a WsException.
      const client = host.switchToWs().getClient<{ emit(event: string, data: unknown): unknown }>();
      logLockFailure(
        error,
        handlerName(host),
        'with LockTransportError data',
        options.busyLogLevel,
      );
      client.emit('exception', toLockTransportError(error, options.errorDetails));
      return;
    }
    if (type !== 'http') throw error;
    const response: unknown = host.switchToHttp().getResponse();
    const adapter = this.adapterHost.httpAdapter;
    // Fastify's adapter only sees a finished reply, not headers written to `reply.raw`: ask both.
    if (adapter.isHeadersSent(response) || headersSent(response)) {
      // A `@Res()` handler had started its answer: no status can be sent any more. As Nest's own
      // filter does then, end what was sent, and say why in the log.
      logger.error(messages.failedAfterResponseStarted(`${error.name}: ${error.message}`));
      adapter.end(response);
      return;
    }
    const mapped = toLockHttpException(error, host, options);
    const exception =
      mapped instanceof HttpException
        ? mapped
        : new ServiceUnavailable(safeMessage(error, options));
    const where = route?.where ?? handlerName(host);
    logLockFailure(error, where, httpAnswer(exception), options.busyLogLevel);
    adapter.reply(response, exception.getResponse(), exception.getStatus());
  }
}

function safeMessage(error: LockFailure, options: ResolvedRedisLockOptions): string {
  return options.errorDetails === 'detailed' ? error.message : publicMessages.unavailable();
}

/** What an `exceptionFactory` that returned no HttpException is answered with. */
class ServiceUnavailable extends HttpException {
  constructor(message: string) {
    super({ statusCode: 503, error: 'Service Unavailable', message }, 503);
  }
}
