import { Logger } from '@nestjs/common';
import { LockLostError, LockNotAcquiredError } from '../../errors/errors';
import { messages } from '../../errors/messages';
import type { LockFailure } from '../../options/redis-lock-options';
import { EVENT_HANDLER_TYPE, NestMetadata } from '../../nest-internals';

const logger = new Logger('RedisLock');

/** Whether `handler` is an `@EventPattern()` handler: fire and forget, nobody hears its errors. */
export function isEventHandler(handler: unknown): boolean {
  return (
    typeof handler === 'function' &&
    Reflect.getMetadata(NestMetadata.patternHandler, handler) === EVENT_HANDLER_TYPE
  );
}

function patternOf(handler: object): string {
  const patterns: unknown = Reflect.getMetadata(NestMetadata.pattern, handler);
  const list = Array.isArray(patterns) ? patterns : [patterns];
  return list.map((pattern) => JSON.stringify(pattern)).join(', ');
}

/**
 * Logs a lock failure of an event handler. Nest sends an event handler's error to no one and logs
 * nothing, so without this line a busy, unkeyable or unreachable lock drops the event silently.
 */
export function logEventFailure(
  error: LockFailure,
  handler: object,
  where: string,
  lockKey?: string,
): void {
  const key =
    error instanceof LockNotAcquiredError || error instanceof LockLostError ? error.key : lockKey;
  logger.error(
    messages.eventNotHandled(
      patternOf(handler),
      where,
      key,
      `${error.name}: ${error.message}`,
      error instanceof LockNotAcquiredError,
    ),
  );
}

/**
 * At bootstrap: an event handler that fails fast on a busy key drops every event that arrives
 * while another one on the same key runs. Say so once, unless dropping was chosen (`onBusy: 'skip'`).
 */
export function warnIfEventsDrop(
  handler: object,
  where: string,
  wait: number,
  onBusy: string,
): void {
  if (wait === 0 && onBusy === 'throw' && isEventHandler(handler)) {
    logger.warn(messages.eventWaitZero(patternOf(handler), where));
  }
}
