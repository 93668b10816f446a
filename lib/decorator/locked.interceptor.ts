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
import { RedisLockError } from '../errors/errors';
import { handlerName, logLockFailure } from '../transports/shared/lock-failure-answer';
import { answerHttpLockFailure } from '../transports/http/http-lock-failure';
import { isLockFailure, toLockHttpException } from '../transports/http/lock-http-exception';
import { LockService } from '../service/lock.service';
import type { LockFailure } from '../options/redis-lock-options';
import { lockContext, type LockedRoute } from '../locking/lock-context';
import type { LockedCall } from '../locking/locked-call';
import { lockSourceFor, type ServiceLockSource } from '../locking/public-lock-source';
import { observeLocked, type CallerPresence } from '../locking/run-locked';
import { isEventHandler, logEventFailure } from '../transports/messages/event-handlers';
import { toTransportException } from '../transports/messages/lock-transport-error';
import { toLockGraphQLError } from '../transports/graphql/lock-graphql-error';
import {
  getResponseBinding,
  responseOver,
  runHeldCall,
  streamOver,
  type ResponseBinding,
} from './locked-response';
import { getLockedSpec, keyFromRoute, type LockedSpec } from './locked-spec';
import { isKeyList, type LockSource, type LockTarget } from '../locking/lock-source';
import { LOCK_SOURCE } from './locked-binding';
import { lockRouteCall, locksAsPromise } from './route-promise';
import { answerSkipped } from './skipped-answer';

/**
 * Locks `@Locked` microservice and gateway handlers, resolvers, and the HTTP routes whose lock
 * needs their request, their response or their caller — a key read from the request, `@Res()`, a
 * stream, another interceptor (`direct-routes.ts`); `@Locked` locks the other routes where Nest
 * calls the handler. Interceptors run before pipes, so it only prepares the call: the lock is
 * taken when Nest calls the handler with the arguments its pipes produced, keyed from them (a
 * request its pipes reject takes no lock). It is then held until the work for the call is done:
 * the handler's promise settled (even if the subscriber left, e.g. a timeout interceptor), a
 * `@Res()` response sent or its connection closed, a `StreamableFile` read to its end, an
 * `@Ack()` sent. A route that answers with what it returns is locked as a plain promise, without
 * a stream of its own (`locksAsPromise`). `@Locked` attaches it by itself (and takes it off, at
 * bootstrap, the routes that need none); it is exported for `APP_INTERCEPTOR`-style setups (each
 * call is still locked once) and for subclassing its seams (`resolveKey`, `toHttpException`), as
 * `ThrottlerGuard` allows: registered on a route, its class or the app, it is another interceptor
 * of the route, which therefore keeps this path.
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
    const asPromise = locksAsPromise(context.getType(), handler, binding, spec.returnsObservable);
    return new Observable<unknown>((subscriber) => {
      const caller: { left: boolean; signal?: AbortSignal } = { left: false };
      let leave: AbortController | undefined;
      const route: LockedRoute = {
        spec,
        run: (args, invoke) => {
          // The caller left (a timeout) while pipes ran: it hears nothing, so nothing runs.
          if (caller.left) throw new RedisLockError(messages.callerLeft(spec.where));
          if (!asPromise) return this.lock(context, spec, binding, locks, args, invoke);
          // Only a waiting acquire needs a signal to cancel (an abort costs a DOMException).
          if ((spec.options.wait ?? locks.options.wait) > 0) {
            leave = new AbortController();
            caller.signal = leave.signal;
          }
          const done = this.lockRoute(context, spec, locks, args, invoke, caller);
          if (leave)
            done.then(
              () => (leave = undefined),
              () => (leave = undefined),
            );
          return done;
        },
      };
      const parent = lockContext.getStore();
      const frame = { held: parent?.held ?? new Map(), hold: parent?.hold, lockedRoute: route };
      const inner = lockContext.run(frame, () => next.handle().subscribe(subscriber));
      return () => {
        caller.left = true;
        leave?.abort();
        inner.unsubscribe();
      };
    });
  }

  /**
   * A route that answers with what it returns, locked in Promise form (`locksAsPromise`): keyed
   * like any call, held until the handler's promise settled — and a `StreamableFile` read — even
   * if the caller left first; a waiting acquire is cancelled when it leaves.
   */
  private lockRoute(
    context: ExecutionContext,
    spec: LockedSpec,
    locks: LockSource,
    args: unknown[],
    invoke: (args: unknown[]) => unknown,
    caller: CallerPresence,
  ): Promise<unknown> {
    const key = this.keyOf(spec, context, args);
    const response = context.switchToHttp().getResponse<unknown>();
    const shown = isKeyList(key) ? key.join(', ') : key;
    return lockRouteCall(
      locks,
      key,
      spec.options,
      () => invoke(args),
      response,
      (error) => this.mapError(error, context, shown),
      caller,
    );
  }

  /** `resolveKey`, its failure (a bad or missing key value) answered as the transport's error. */
  private keyOf(spec: LockedSpec, context: ExecutionContext, args: unknown[]): LockTarget {
    try {
      return this.resolveKey(spec, context, args);
    } catch (error) {
      throw this.mapError(error, context);
    }
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
    const key = this.keyOf(spec, context, args);
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
      defer(() =>
        ran ? EMPTY : answerSkipped(context, spec, binding, this.adapterHost?.httpAdapter),
      ),
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
    const { busyLogLevel } = this.locks!.options;
    if (type === 'http') {
      const response = context.switchToHttp().getResponse<unknown>();
      return answerHttpLockFailure(
        error,
        where,
        response,
        (failure) => this.toHttpException(failure, context),
        busyLogLevel,
      );
    }
    if (context.getType<string>() === 'graphql') {
      logLockFailure(error, where, 'with a GraphQL error', busyLogLevel);
      return toLockGraphQLError(error, this.locks!.options.errorDetails);
    }
    if (type !== 'rpc' && type !== 'ws') return error;
    // An event's caller hears nothing back: this line is the failure's whole trace.
    if (type === 'rpc' && isEventHandler(handler)) logEventFailure(error, handler, where, key);
    else logLockFailure(error, where, 'with LockTransportError data', busyLogLevel);
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
