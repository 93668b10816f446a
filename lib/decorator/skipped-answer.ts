import type { ExecutionContext } from '@nestjs/common';
import type { AbstractHttpAdapter } from '@nestjs/core';
import { EMPTY, of, type Observable } from 'rxjs';
import { rawResponse, skippedAck, type ResponseBinding } from './locked-response';
import type { LockedSpec } from './locked-spec';
import { NestMetadata } from '../nest-internals';

/**
 * The answer of a call skipped as busy: `undefined` (an empty 200/201), a 204 sent for a route
 * that answers by itself (`@Res()`), `{ status: 'skipped' }` as a gateway's acknowledgement, or
 * an empty stream for `@Sse()` routes (told by their metadata, not by a return type the
 * compiler may not have recorded) and other Observable handlers.
 */
export function answerSkipped(
  context: ExecutionContext,
  spec: LockedSpec,
  binding: ResponseBinding,
  adapter: AbstractHttpAdapter | undefined,
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
    replyNoContent(context.switchToHttp().getResponse<unknown>(), adapter);
    return of(undefined);
  }
  const streams = Reflect.getMetadata(NestMetadata.sse, context.getHandler()) === true;
  return streams || spec.returnsObservable ? EMPTY : of(undefined);
}

function replyNoContent(response: unknown, adapter: AbstractHttpAdapter | undefined): void {
  const raw = rawResponse(response);
  if (!raw || raw.headersSent) return;
  if (adapter) {
    adapter.reply(response, undefined, 204);
  } else {
    raw.statusCode = 204;
    raw.end();
  }
}
