import { StreamableFile } from '@nestjs/common';
import { finalize, isObservable } from 'rxjs';
import type { LockedCall } from '../locking/locked-call';
import type { LockSource, LockTarget } from '../locking/lock-source';
import { callLocked, type CallerPresence, type RunLockedOptions } from '../locking/run-locked';
import { responseOver, streamOver, type ResponseBinding } from './locked-response';
import { NestMetadata } from '../nest-internals';

/**
 * Whether a `@Locked` call is locked in Promise form: an HTTP route that answers with what it
 * returns — no `@Res()`/`@Next()` taking the response, not `@Sse()`, not declared to return an
 * Observable. Its handler's promise is what the lock waits for, so no stream of our own is needed
 * around it: the Observable pipeline costs more CPU per request than the lock's own work.
 */
export function locksAsPromise(
  type: string,
  handler: object,
  binding: ResponseBinding,
  returnsObservable: boolean,
): boolean {
  return (
    type === 'http' &&
    !binding.sendsResponse &&
    !returnsObservable &&
    Reflect.getMetadata(NestMetadata.sse, handler) !== true
  );
}

/**
 * Takes the lock and runs a route handler under it (see `locksAsPromise`): `callLocked`, with what
 * outlives the handler's promise held on the call — a `StreamableFile` until its stream ended, an
 * Observable the promise resolved to until it ends — or, given the `response`, until it is over.
 * `caller` tells whether the caller still listens; a route called without an interceptor has
 * neither (Nest ends a file's stream, and unsubscribes a stream, when its response is over).
 */
export function lockRouteCall(
  locks: LockSource,
  key: LockTarget,
  options: RunLockedOptions,
  run: () => unknown,
  response: unknown,
  mapError: (error: unknown) => unknown,
  caller?: CallerPresence,
): Promise<unknown> {
  return callLocked(
    locks,
    key,
    options,
    (call) => {
      // Not an async function: a promise fewer per request, on the path every route call takes.
      const result = run();
      return isThenable(result)
        ? Promise.resolve(result).then((value) => heldValue(value, call, response))
        : heldValue(result, call, response);
    },
    mapError,
    caller,
  );
}

/** What a handler resolved to, with the work that outlives it held on the call. */
function heldValue(value: unknown, call: LockedCall, response: unknown): unknown {
  if (value instanceof StreamableFile) call.hold(streamOver(value, response));
  if (!isObservable(value)) return value;
  // A stream the return type did not reveal (`Promise<Observable>`): held until it ends, or until
  // the response is over (a timeout may answer before anyone subscribes).
  let ended!: () => void;
  const over = new Promise<void>((resolve) => (ended = resolve));
  if (response !== undefined) void responseOver(response).then(ended);
  call.hold(over);
  return value.pipe(finalize(ended));
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    (typeof value === 'object' || typeof value === 'function') &&
    value !== null &&
    typeof (value as PromiseLike<unknown>).then === 'function'
  );
}
