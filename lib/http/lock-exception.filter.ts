import {
  Catch,
  HttpException,
  Injectable,
  Optional,
  type ArgumentsHost,
  type ExceptionFilter,
} from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { throwError, type Observable } from 'rxjs';
import { LockKeyError } from '../errors/lock-key.error';
import { LockLostError } from '../errors/lock-lost.error';
import { LockNotAcquiredError } from '../errors/lock-not-acquired.error';
import { RedisCommandError } from '../errors/redis-command.error';
import { RedisUnavailableError } from '../errors/redis-unavailable.error';
import { LockService } from '../lock.service';
import type { LockFailure } from '../module/redis-lock-options';
import { resolveOptions } from '../module/resolve-options';
import { toLockHttpException } from './lock-http-exception';

/**
 * Answers lock failures thrown by services during an HTTP request — a busy `@Locked` provider
 * method, a `withLock` — the way `@Locked` routes answer them (409 + `Retry-After`, 400, 503)
 * instead of Nest's 500. Opt in app-wide:
 *
 * @example
 * ```ts
 * providers: [{ provide: APP_FILTER, useClass: LockExceptionFilter }]
 * ```
 * Register it on HTTP apps: an RPC call gets the lock error back as its error, unchanged.
 */
@Catch(LockNotAcquiredError, LockKeyError, LockLostError, RedisUnavailableError, RedisCommandError)
@Injectable()
export class LockExceptionFilter implements ExceptionFilter<LockFailure> {
  constructor(
    private readonly adapterHost: HttpAdapterHost,
    @Optional() private readonly locks?: LockService,
  ) {}

  catch(error: LockFailure, host: ArgumentsHost): Observable<never> | void {
    // Microservices expect an Observable error from a filter; gateways have their own filters.
    if (host.getType() === 'rpc') return throwError(() => error);
    if (host.getType() !== 'http') throw error;
    const options = this.locks?.options ?? resolveOptions();
    const mapped = toLockHttpException(error, host, options);
    const exception =
      mapped instanceof HttpException ? mapped : new ServiceUnavailable(error.message);
    this.adapterHost.httpAdapter.reply(
      host.switchToHttp().getResponse(),
      exception.getResponse(),
      exception.getStatus(),
    );
  }
}

/** What an `exceptionFactory` that returned no HttpException is answered with. */
class ServiceUnavailable extends HttpException {
  constructor(message: string) {
    super({ statusCode: 503, error: 'Service Unavailable', message }, 503);
  }
}
