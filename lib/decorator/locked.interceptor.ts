import {
  Injectable,
  Optional,
  type CallHandler,
  type ExecutionContext,
  type NestInterceptor,
} from '@nestjs/common';
import { defaultIfEmpty, throwError, type Observable } from 'rxjs';
import { messages } from '../errors/messages';
import { RedisLockError } from '../errors/redis-lock.error';
import { isLockFailure, toLockHttpException } from '../http/lock-http-exception';
import { LockService } from '../lock.service';
import type { LockFailure } from '../module/redis-lock-options';
import { lockContext } from '../locking/lock-context';
import { observeLocked } from '../locking/run-locked';
import { isEventHandler, logEventFailure } from '../rpc/event-handlers';
import { toTransportException } from '../rpc/lock-transport-error';
import { getLockedSpec, keyFromContext, type LockedSpec } from './locked-spec';

/**
 * Takes the lock of a `@Locked` route before the handler runs (and before its pipes), keyed from
 * the request, and holds it until the response completes. `@Locked` attaches it by itself; it is
 * exported for `APP_INTERCEPTOR`-style setups and for subclassing its seams (`resolveKey`,
 * `toHttpException`), as `ThrottlerGuard` allows.
 */
@Injectable()
export class LockedInterceptor implements NestInterceptor {
  constructor(@Optional() private readonly locks?: LockService) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const handler = context.getHandler();
    const spec = getLockedSpec(handler);
    // No lock, or one already taken for this very call (the interceptor registered twice, e.g.
    // also as APP_INTERCEPTOR): pass through rather than lock against ourselves.
    if (!spec || lockContext.getStore()?.lockedByInterceptor === spec) return next.handle();
    if (!this.locks) return throwError(() => new RedisLockError(messages.notBound(spec.where)));

    let key: string;
    try {
      key = this.resolveKey(spec, context);
    } catch (error) {
      return throwError(() => this.mapError(error, context));
    }
    const run = (): Observable<unknown> =>
      lockContext.run({ ...lockContext.getStore()!, lockedByInterceptor: spec }, () =>
        next.handle(),
      );
    const locked = observeLocked(this.locks, key, spec.options, run, (error) =>
      this.mapError(error, context, key),
    );
    // A call skipped as busy (`onBusy: 'skip'`) completes without a value. A handler that returns
    // a value answers as if it returned `undefined`, instead of Nest failing on an empty stream (500).
    return spec.returnsObservable ? locked : locked.pipe(defaultIfEmpty(undefined));
  }

  /** Builds the lock key for this call. Override to derive keys differently. */
  protected resolveKey(spec: LockedSpec, context: ExecutionContext): string {
    return keyFromContext(spec, context);
  }

  /**
   * Turns a lock failure on an HTTP route into an HTTP exception (see `toLockHttpException`).
   * Override for a different shape. Microservice and WebSocket handlers get an `RpcException` /
   * `WsException` carrying `LockTransportError` data instead.
   */
  protected toHttpException(error: LockFailure, context: ExecutionContext): unknown {
    return toLockHttpException(error, context, this.locks!.options);
  }

  private mapError(error: unknown, context: ExecutionContext, key?: string): unknown {
    if (!isLockFailure(error)) return error;
    const type = context.getType();
    if (type === 'http') return this.toHttpException(error, context);
    // An event's caller hears nothing back, so its lock failure is logged.
    const handler = context.getHandler();
    if (type === 'rpc' && isEventHandler(handler)) {
      logEventFailure(error, handler, getLockedSpec(handler)?.where ?? handler.name, key);
    }
    // Microservices and gateways: the transport's exception carries the failure as data.
    if (type === 'rpc' || type === 'ws') return toTransportException(error, type);
    return error;
  }
}
