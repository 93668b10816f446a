import { AsyncResource } from 'node:async_hooks';

/**
 * The async context taken when the library loads (at startup, outside any request). The timers
 * the library shares between calls — the watchdog's, the command bounds' — and 'lost' listeners
 * run in it: a timer armed inside whichever call came first would otherwise run every later
 * renewal, loss, timeout, signal abort and listener in that call's context, so `currentLock()` and
 * request-scoped stores (a request logger) would name an unrelated request.
 */
export const neutralScope = new AsyncResource('RedisLock');
