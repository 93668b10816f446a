import {
  Inject,
  Injectable,
  Optional,
  StreamableFile,
  type CallHandler,
  type ExecutionContext,
  type NestInterceptor,
} from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import {
  concat,
  defer,
  EMPTY,
  from,
  isObservable,
  Observable,
  of,
  switchMap,
  tap,
  throwError,
} from 'rxjs';
import { messages } from '../errors/messages';
import { RedisLockError } from '../errors/redis-lock.error';
import { handlerName, httpAnswer, logLockFailure } from '../transports/shared/lock-failure-answer';
import {
  headersSent,
  isLockFailure,
  toLockHttpException,
} from '../transports/http/lock-http-exception';
import { LockService } from '../service/lock.service';
import type { LockFailure } from '../options/redis-lock-options';
import { lockContext, type LockedRoute } from '../locking/lock-context';
import type { LockedCall } from '../locking/locked-call';
import type { LockSource } from '../locking/lock-source';
import { lockSourceFor, type ServiceLockSource } from '../locking/public-lock-source';
import { observeLocked } from '../locking/run-locked';
import { isEventHandler, logEventFailure } from '../transports/messages/event-handlers';
import { toTransportException } from '../transports/messages/lock-transport-error';
import { toLockGraphQLError } from '../transports/graphql/lock-graphql-error';
import {
  getResponseBinding,
  rawResponse,
  responseOver,
  runHeldCall,
  skippedAck,
  streamOver,
  type ResponseBinding,
} from './locked-response';
import { getLockedSpec, keyFromRoute, type LockedSpec } from './locked-spec';
import { isKeyList, type LockTarget } from '../locking/lock-source';
import { LOCK_SOURCE } from './locked-binding';

/** What `@Sse()` stores on a handler (the key `@nestjs/common` uses; no deep import, for ESM builds). */
const SSE_METADATA = '__sse__';

/**
 * Locks `@Locked` routes, microservice and gateway handlers. Interceptors run before pipes, so it
 * only prepares the call: the lock is taken when Nest calls the handler with the arguments its
 * pipes produced, keyed from them (a request its pipes reject takes no lock). It is then held until
 * the work for the call is done: the handler's promise settled (even if the subscriber left, e.g. a
 * timeout interceptor), a `@Res()` response sent or its connection closed, a `StreamableFile` read
 * to its end, an `@Ack()` sent. `@Locked` attaches it by itself; it is exported for
 * `APP_INTERCEPTOR`-style setups and for subclassing its seams (`resolveKey`, `toHttpException`),
 * as `ThrottlerGuard` allows.
 */
@Injectable()
export class LockedInterceptor implements NestInterceptor {
  /** The LockService routes lock through; a test double of it through its public API. */
  private readonly locks?: ServiceLockSource;

  constructor(
    // By the module's global alias, not the class: another copy of the package finds it too.
    @Optional() @Inject(LOCK_SOURCE) locks?: LockService,
    @Optional() private readonly adapterHost?: HttpAdapterHost,
  ) {
    this.locks = locks && lockSourceFor(locks);
  }

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const handler = context.getHandler();
    const spec = getLockedSpec(handler);
    // No lock, or this call prepared already (the interceptor registered twice, e.g. also as
    // APP_INTERCEPTOR): pass through rather than lock against ourselves.
    if (!spec || lockContext.getStore()?.lockedRoute?.spec === spec) return next.handle();
    if (!this.locks) return throwError(() => new RedisLockError(messages.notBound(spec.where)));
    const locks = this.locks;
    const binding = getResponseBinding(handler);
    return new Observable<unknown>((subscriber) => {
      let left = false;
      const route: LockedRoute = {
        spec,
        run: (args, invoke) => {
          // The caller left (a timeout) while pipes ran: it hears nothing, so nothing runs.
          if (left) throw new RedisLockError(messages.callerLeft(spec.where));
          return this.lock(context, spec, binding, locks, args, invoke);
        },
      };
      const parent = lockContext.getStore();
      const frame = { held: parent?.held ?? new Map(), hold: parent?.hold, lockedRoute: route };
      const inner = lockContext.run(frame, () => next.handle().subscribe(subscriber));
      return () => {
        left = true;
        inner.unsubscribe();
      };
    });
  }

  /** Keys the call from the handler's arguments, takes the lock and runs the handler under it. */
  private lock(
    context: ExecutionContext,
    spec: LockedSpec,
    binding: ResponseBinding,
    locks: LockSource,
    args: unknown[],
    invoke: (args: unknown[]) => unknown,
  ): Observable<unknown> {
    let key: LockTarget;
    try {
      key = this.resolveKey(spec, context, args);
    } catch (error) {
      throw this.mapError(error, context);
    }
    let ran = false;
    const locked = observeLocked(
      locks,
      key,
      spec.options,
      (call) => {
        ran = true;
        return this.runHeld(context, spec, call, binding, args, invoke);
      },
      (error) => this.mapError(error, context, isKeyList(key) ? key.join(', ') : key),
    );
    // A call skipped as busy (`onBusy: 'skip'`) never ran: it still answers.
    return concat(
      locked,
      defer(() => (ran ? EMPTY : this.answerSkipped(context, spec, binding))),
    );
  }

  /** Runs the handler, recording on `call` the work that must end before the release. */
  private runHeld(
    context: ExecutionContext,
    spec: LockedSpec,
    call: LockedCall,
    binding: ResponseBinding,
    args: unknown[],
    invoke: (args: unknown[]) => unknown,
  ): Observable<unknown> {
    const type = context.getType();
    const response = type === 'http' ? context.switchToHttp().getResponse<unknown>() : undefined;
    if (binding.sendsResponse) call.hold(responseOver(response));
    if (type === 'ws') call.client = context.switchToWs().getClient<unknown>();
    return defer(() => asStream(runHeldCall(call, binding, spec.where, args, invoke))).pipe(
      tap((value) => {
        if (value instanceof StreamableFile) call.hold(streamOver(value, response));
      }),
    );
  }

  /**
   * The answer of a call skipped as busy: `undefined` (an empty 200/201), a 204 sent for a route
   * that answers by itself (`@Res()`), `{ status: 'skipped' }` as a gateway's acknowledgement, or
   * an empty stream for `@Sse()` routes (told by their metadata, not by a return type the
   * compiler may not have recorded) and other Observable handlers.
   */
  private answerSkipped(
    context: ExecutionContext,
    spec: LockedSpec,
    binding: ResponseBinding,
  ): Observable<unknown> {
    const type = context.getType();
    if (type === 'ws') {
      if (binding.ackIndex === undefined) return of(skippedAck()); // Nest acks the value
      // socket.io passes [client, data, ack]: the handler would have called `ack` itself.
      const ack: unknown = context.getArgByIndex(2);
      if (typeof ack === 'function') ack(skippedAck());
      return of(undefined);
    }
    if (type === 'http' && binding.sendsResponse) {
      this.replyNoContent(context.switchToHttp().getResponse<unknown>());
      return of(undefined);
    }
    const streams = Reflect.getMetadata(SSE_METADATA, context.getHandler()) === true;
    return streams || spec.returnsObservable ? EMPTY : of(undefined);
  }

  private replyNoContent(response: unknown): void {
    const raw = rawResponse(response);
    if (!raw || raw.headersSent) return;
    const adapter = this.adapterHost?.httpAdapter;
    if (adapter) {
      adapter.reply(response, undefined, 204);
    } else {
      raw.statusCode = 204;
      raw.end();
    }
  }

  /**
   * Builds the lock key for this call from the arguments the handler receives (after pipes):
   * several keys for `@Locked([...])`, locked together. Override to derive keys differently.
   */
  protected resolveKey(spec: LockedSpec, context: ExecutionContext, args: unknown[]): LockTarget {
    return keyFromRoute(spec, args, context);
  }

  /**
   * Turns a lock failure on an HTTP route into an HTTP exception (see `toLockHttpException`).
   * Override for a different shape. Microservice and WebSocket handlers get an `RpcException` /
   * `WsException` carrying `LockTransportError` data instead.
   */
  protected toHttpException(error: LockFailure, context: ExecutionContext): unknown {
    return toLockHttpException(error, context, this.locks!.options);
  }

  /** Shapes a lock failure for the caller, and logs (once) the detail the answer leaves out. */
  private mapError(error: unknown, context: ExecutionContext, key?: string): unknown {
    if (!isLockFailure(error)) return error;
    const type = context.getType();
    const handler = context.getHandler();
    const where = getLockedSpec(handler)?.where ?? handlerName(context);
    if (type === 'http') {
      const exception = this.toHttpException(error, context);
      const started = headersSent(context.switchToHttp().getResponse());
      logLockFailure(error, where, httpAnswer(exception, started));
      return exception;
    }
    if (context.getType<string>() === 'graphql') {
      logLockFailure(error, where, 'with a GraphQL error');
      return toLockGraphQLError(error, this.locks!.options.errorDetails);
    }
    if (type !== 'rpc' && type !== 'ws') return error;
    // An event's caller hears nothing back: this line is the failure's whole trace.
    if (type === 'rpc' && isEventHandler(handler)) logEventFailure(error, handler, where, key);
    else logLockFailure(error, where, 'with LockTransportError data');
    // Microservices and gateways: the transport's exception carries the failure as data.
    return toTransportException(error, type, this.locks!.options.errorDetails);
  }
}

/** What the handler returned, as Nest's own interceptor chain would stream it. */
function asStream(result: unknown): Observable<unknown> {
  if (isObservable(result)) return result;
  if (!(result instanceof Promise)) return of(result);
  return from(result).pipe(switchMap((value) => (isObservable(value) ? value : of(value))));
}
