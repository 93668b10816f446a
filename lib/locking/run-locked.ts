import { Observable, type Subscription } from 'rxjs';
import type { LockHandle } from '../engine/lock-handle';
import { acquireOrSkip, endHold, type HeldCall } from './held-call';
import { Hold, releaseQuietly } from './holds';
import type { LockSource, LockTarget } from './lock-source';
import { joinHeld } from './join-held';
import { frameWith, lockContext } from './lock-context';
import { LockedCall } from './locked-call';
import { lockSourceFor } from './public-lock-source';
import type { RunLockedOptions } from './run-locked-options';

export type { RunLockedOptions };

/**
 * Holds `key` while `fn` runs: joins a lock this call chain already holds (re-entrancy),
 * otherwise acquires; runs `fn` in a frame that carries its hold, and ends the hold after. The
 * last hold of a lock releases it. `fn`'s own errors pass through untouched; a lock lost while it
 * ran becomes `LockLostError` after it settles. Resolves `undefined` without running `fn` when
 * busy and `onBusy` is `'skip'`. A source that is not this package's `LockService` (a test
 * double) is used through its public `acquire` and `LockHandle` only.
 */
export async function runLocked<T>(
  given: LockSource,
  key: LockTarget,
  options: RunLockedOptions,
  fn: (lock: LockHandle) => T | Promise<T>,
): Promise<T> {
  const locks = lockSourceFor(given);
  const parent = lockContext.getStore();
  // Joined synchronously, at call time: a caller that does not await this call cannot end the
  // last hold (and release) before this one counts.
  let hold = joinHeld(locks, key, options, parent);
  const reentrant = hold !== undefined;
  if (!hold) {
    const lock = await acquireOrSkip(locks, key, options);
    if (!lock) return undefined as T;
    hold = Hold.of(lock);
  }
  const own = hold;
  // The `lock.hold` span (with a tracer provider registered): the work's own spans go under it.
  const span = locks.engine.lifecycle?.holdSpan(own.lock, reentrant);
  const work = (): T | Promise<T> => lockContext.run(frameWith(parent, own), () => fn(own.handle));
  let result: T;
  try {
    result = await (span ? span.run(work) : work());
  } catch (error) {
    const lost = await own.end();
    span?.end({ error }, lost?.reason);
    throw error;
  }
  const lost = await own.end();
  span?.end(undefined, lost?.reason);
  if (lost && (options.onLost ?? locks.options.onLost) === 'throw') throw lost;
  return result;
}

/**
 * The Observable form of `runLocked`, for handlers that return streams (SSE included): acquires
 * on subscribe, holds until the source completes, errors or the subscriber leaves, and releases at
 * once a lock granted after the subscriber left. `mapError` shapes lock failures only.
 *
 * `source` gets the call's `LockedCall`: work held there (a route handler's promise, its response,
 * a stream, an acknowledgement) keeps the lock — renewed — after the source ended or the subscriber
 * left, until it settles. The lock's signal, as the source sees it, aborts when the hold ends.
 */
export function observeLocked<T>(
  given: LockSource,
  key: LockTarget,
  options: RunLockedOptions,
  source: (call: LockedCall) => Observable<T>,
  mapError: (error: unknown) => unknown = (error) => error,
): Observable<T> {
  const locks = lockSourceFor(given);
  return new Observable<T>((subscriber) => {
    const parent = lockContext.getStore();
    const joined = joinHeld(locks, key, options, parent);
    if (joined) {
      // Counted until the subscription closes, however it closes (a throwing source included),
      // and until the work the call holds has settled. The subscriber itself is passed on, so a
      // consumer that leaves while the source is being subscribed still unsubscribes it.
      const call = new LockedCall();
      subscriber.add(() => void endHold({ hold: joined, call }));
      return lockContext.run(frameWith(parent, joined), () => source(call).subscribe(subscriber));
    }

    let held: HeldCall | undefined;
    let inner: Subscription | undefined;
    let closed = false;
    // Cancels a waiting acquire when the subscriber leaves; a fail-fast one (wait 0) needs none,
    // and a grant that lands after the subscriber left is released below anyway.
    const waits = (options.wait ?? locks.options.wait) > 0;
    const leave = waits ? new AbortController() : undefined;
    // A mapping that throws (a header that can no longer be set, a user's exception factory)
    // must still reach the subscriber: these run in promise callbacks, where a throw would be an
    // unhandled rejection and the subscriber would never hear back.
    const failWith = (error: unknown): void => {
      let mapped: unknown;
      try {
        mapped = mapError(error);
      } catch (mappingError) {
        mapped = mappingError;
      }
      subscriber.error(mapped);
    };
    const finish = async (error?: unknown, failed = false): Promise<void> => {
      const ending = held;
      held = undefined;
      if (!ending) return;
      if (ending.call.busy) {
        // Work for the key outlives the stream (a response still being sent, an ack not yet
        // called): answer now, release once it is done. A loss then is reported by the engine.
        if (failed) subscriber.error(error);
        else subscriber.complete();
        void endHold(ending);
        return;
      }
      const lost = await endHold(ending);
      if (failed) subscriber.error(error);
      else if (lost && (options.onLost ?? locks.options.onLost) === 'throw') failWith(lost);
      else subscriber.complete();
    };

    const signal =
      options.signal && leave
        ? AbortSignal.any([options.signal, leave.signal])
        : (options.signal ?? leave?.signal);
    acquireOrSkip(locks, key, { ...options, signal }).then(
      (acquired) => {
        if (!acquired) return subscriber.complete();
        if (closed) return void releaseQuietly(acquired);
        const started: HeldCall = { hold: Hold.of(acquired), call: new LockedCall() };
        held = started;
        lockContext.run(frameWith(parent, started.hold), () => {
          try {
            inner = source(started.call).subscribe({
              next: (value) => subscriber.next(value),
              error: (error: unknown) => void finish(error, true),
              complete: () => void finish(),
            });
          } catch (error) {
            void finish(error, true);
          }
        });
        // The consumer left on a value emitted while subscribing (`startWith`, a
        // `BehaviorSubject`, then `take(1)`): teardown ran before `inner` existed. The hold's end
        // waits a tick at least, so the source stops here, before the key can be released.
        if (closed) inner?.unsubscribe();
      },
      (error: unknown) => {
        if (!closed) failWith(error);
      },
    );

    return () => {
      closed = true;
      leave?.abort();
      inner?.unsubscribe();
      const ending = held;
      held = undefined;
      // Teardown has run; the held work (a promise that cannot be cancelled) still holds the key.
      if (ending) void endHold(ending);
    };
  });
}
