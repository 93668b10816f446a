import type { Logger } from '@nestjs/common';
import type { EventEmitter } from 'node:events';
import type { LockLostError } from '../errors/errors';
import { messages } from '../errors/messages';
import type { LockEventName, LockEvents } from './lock-events';
import type { LockHandle } from './lock-handle';
import { neutralScope } from '../util/neutral-scope';

/**
 * Calls every listener of `event` on `events` with `args`, in a neutral async context. A listener
 * that throws, or returns a promise that rejects (an async listener), is logged and does not keep
 * the others from running: events are emitted from the watchdog's tick and from lock calls, where
 * an exception would stop the one or fail the other, and a dropped rejection would be unhandled
 * (and can end the process).
 */
export function emitSafely<E extends LockEventName>(
  events: EventEmitter,
  logger: Logger,
  event: E,
  ...args: LockEvents[E]
): void {
  const failed = (listenerError: unknown): void =>
    logger.error(messages.listenerFailed(event, String(listenerError)));
  neutralScope.runInAsyncScope(() => {
    for (const listener of events.rawListeners(event) as ((...args: unknown[]) => unknown)[]) {
      try {
        const returned = listener.apply(events, args);
        if (isThenable(returned)) returned.then(undefined, failed);
      } catch (listenerError) {
        failed(listenerError);
      }
    }
  });
}

/** Calls every `'lost'` listener with the loss (see `emitSafely`). */
export function emitLost(
  events: EventEmitter,
  logger: Logger,
  error: LockLostError,
  lock: LockHandle,
): void {
  emitSafely(events, logger, 'lost', error, lock);
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as PromiseLike<unknown> | undefined)?.then === 'function';
}
