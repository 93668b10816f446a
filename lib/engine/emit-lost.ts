import type { Logger } from '@nestjs/common';
import type { EventEmitter } from 'node:events';
import type { LockLostError } from '../errors/lock-lost.error';
import { messages } from '../errors/messages';
import type { LockHandle } from './lock-handle';
import { neutralScope } from './neutral-scope';

/**
 * Calls every `'lost'` listener of `events` with the loss, in a neutral async context. A listener
 * that throws, or returns a promise that rejects (an async listener), is logged and does not keep
 * the others from running: a loss is reported from the watchdog's tick, where an exception would
 * stop it and a dropped rejection would be unhandled (and can end the process).
 */
export function emitLost(
  events: EventEmitter,
  logger: Logger,
  error: LockLostError,
  lock: LockHandle,
): void {
  const failed = (listenerError: unknown): void =>
    logger.error(messages.lostListenerFailed(String(listenerError)));
  neutralScope.runInAsyncScope(() => {
    for (const listener of events.rawListeners('lost') as ((...args: unknown[]) => unknown)[]) {
      try {
        const returned = listener.call(events, error, lock);
        if (isThenable(returned)) returned.then(undefined, failed);
      } catch (listenerError) {
        failed(listenerError);
      }
    }
  });
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as PromiseLike<unknown> | undefined)?.then === 'function';
}
