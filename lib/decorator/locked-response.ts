import type { StreamableFile } from '@nestjs/common';
import { messages } from '../errors/messages';
import { RedisLockError } from '../errors/errors';
import type { LockedCall } from '../locking/locked-call';
import { HttpParamType, NestMetadata, WS_ACK_PARAM_TYPE } from '../nest-internals';

/** How a route or gateway handler answers, when it does so itself. */
export interface ResponseBinding {
  /** `@Res()` or `@Next()` without `passthrough`: the handler sends the response, maybe later. */
  readonly sendsResponse: boolean;
  /** Position of a gateway handler's `@Ack()` parameter: it acknowledges by hand. */
  readonly ackIndex?: number;
}

/** What a gateway acknowledges when a call is skipped as busy (`onBusy: 'skip'`). */
export interface LockSkippedAck {
  readonly status: 'skipped';
}

export const skippedAck = (): LockSkippedAck => ({ status: 'skipped' });

const RESPONSE_BINDING = 'nestjs-redis-lock:response-binding';

export function defineResponseBinding(method: object, binding: ResponseBinding): void {
  Reflect.defineMetadata(RESPONSE_BINDING, binding, method);
}

export function getResponseBinding(method: object): ResponseBinding {
  return Reflect.getMetadata(RESPONSE_BINDING, method) ?? { sendsResponse: false };
}

export function readResponseBinding(target: object, method: string | symbol): ResponseBinding {
  const owner = typeof target === 'function' ? target : target.constructor;
  // Read once when `@Locked` decorates a method: its parameter decorators have run by then.
  const params: Record<string, { index: number }> =
    Reflect.getMetadata(NestMetadata.routeArgs, owner, method) ?? {};
  let answersItself = false;
  let ackIndex: number | undefined;
  for (const [name, param] of Object.entries(params)) {
    const type = Number(name.split(':')[0]);
    if (type === HttpParamType.RESPONSE || type === HttpParamType.NEXT) answersItself = true;
    else if (type === WS_ACK_PARAM_TYPE) ackIndex = param.index;
  }
  const passthrough = Reflect.getMetadata(NestMetadata.responsePassthrough, owner, method) === true;
  return { sendsResponse: answersItself && !passthrough, ackIndex };
}

/**
 * Runs a handler under the lock its interceptor took for this call, and records on the call what
 * outlives the handler's return: its promise, and for `@Ack()` the acknowledgement (wrapped, so
 * the lock is held until it is sent, the handler fails, or the client leaves).
 */
export function runHeldCall(
  call: LockedCall,
  binding: ResponseBinding,
  where: string,
  args: unknown[],
  run: (args: unknown[]) => unknown,
): unknown {
  // The subscriber left while pipes ran and the lock is gone: running now would be unprotected.
  if (!call.open) throw new RedisLockError(messages.callAfterRelease(where));
  let ackOver: (() => void) | undefined;
  const ack = binding.ackIndex === undefined ? undefined : args[binding.ackIndex];
  if (typeof ack === 'function') {
    args = [...args];
    args[binding.ackIndex!] = function (this: unknown, ...answer: unknown[]): unknown {
      try {
        return ack.apply(this, answer);
      } finally {
        ackOver?.();
      }
    };
    const over = untilGone(call.client, ['disconnect', 'close']);
    ackOver = over.end;
    call.hold(over.promise);
  }
  let result: unknown;
  try {
    result = run(args);
  } catch (error) {
    ackOver?.(); // failed: no ack will come
    throw error;
  }
  if (!isThenable(result)) return result;
  // Watched as a native promise, so a lazy thenable's `then()` (a query builder) still runs once.
  const settled = result instanceof Promise ? result : Promise.resolve(result);
  call.hold(settled);
  if (ackOver) settled.then(undefined, ackOver);
  return settled;
}

/** Resolves once the response is over: sent (`finish`) or its connection closed (`close`). */
export function responseOver(response: unknown): Promise<void> {
  const raw = rawResponse(response);
  if (!raw || raw.writableFinished || raw.destroyed) return Promise.resolve();
  return untilGone(raw, ['finish', 'close']).promise;
}

/** Resolves once a `StreamableFile`'s stream ended, failed or closed, or its response is over. */
export function streamOver(file: StreamableFile, response: unknown): Promise<void> {
  const stream = file.getStream();
  if (stream.readableEnded || stream.destroyed) return Promise.resolve();
  const read = untilGone(stream, ['end', 'error', 'close']);
  const sent = response === undefined ? undefined : responseOver(response);
  void sent?.then(read.end);
  return read.promise;
}

/** Express `res`, or Fastify's `reply.raw`: Node's response, whose events tell when it is over. */
export function rawResponse(response: unknown): NodeResponse | undefined {
  if (typeof response !== 'object' || response === null) return undefined;
  const raw = (response as { raw?: unknown }).raw ?? response;
  return typeof (raw as NodeResponse).on === 'function' ? (raw as NodeResponse) : undefined;
}

interface Emitter {
  on(event: string, listener: () => void): unknown;
  off(event: string, listener: () => void): unknown;
}

interface NodeResponse extends Emitter {
  readonly writableFinished?: boolean;
  readonly destroyed?: boolean;
  readonly headersSent?: boolean;
  statusCode: number;
  end(): void;
}

/**
 * A promise that resolves on the first of `events` on `emitter` (never, for a non-emitter), or when
 * `end()` is called; its listeners are removed either way, so a long-lived socket collects none.
 */
function untilGone(
  emitter: unknown,
  events: string[],
): { promise: Promise<void>; end: () => void } {
  let end!: () => void;
  const promise = new Promise<void>((resolve) => {
    const target = isEmitter(emitter) ? emitter : undefined;
    end = () => {
      for (const event of events) target?.off(event, end);
      resolve();
    };
    if ((emitter as { disconnected?: boolean } | undefined)?.disconnected === true) return end();
    for (const event of events) target?.on(event, end);
  });
  return { promise, end };
}

function isEmitter(value: unknown): value is Emitter {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as Emitter).on === 'function' &&
    typeof (value as Emitter).off === 'function'
  );
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    (typeof value === 'object' || typeof value === 'function') &&
    value !== null &&
    typeof (value as PromiseLike<unknown>).then === 'function'
  );
}
