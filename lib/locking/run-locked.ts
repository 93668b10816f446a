import { Observable, type Subscription } from 'rxjs';
import type { LockHandle } from '../engine/lock-handle';
import { LockNotAcquiredError, type LockLostError } from '../errors/errors';
import type { WithLockOptions } from '../options/lock-call-options';
import { leaseKindOf } from '../options/permits-option';
import type { OnBusyPolicy } from '../options/redis-lock-options';
import { HandleLease } from './handle-lease';
import type { HeldLease } from './held-lease';
import { Hold, releaseQuietly } from './holds';
import { joinHeld } from './join-held';
import { frameKeyOf } from './lease-frames';
import { frameWith, lockContext, type LockFrame } from './lock-context';
import { isKeyList, type LockSource, type LockTarget } from './lock-source';
import { LockedCall } from './locked-call';
import { lockSourceFor, type ServiceLockSource } from './public-lock-source';

/**
 * Work run under a lock, in one place: join a hold the call chain has (re-entrancy, `joinHeld`),
 * else acquire or skip (`acquireHold`); run the work in a frame that carries its hold
 * (`inFrame`: `currentLock()`, nested joins); end the hold after the work (`endHold`: the last
 * hold releases, `minHold` and `maxHold` are the hold's); and answer a loss as `onLost` says
 * (`lostToThrow`). The forms differ only in how the work starts and its end is heard: a
 * callback's promise (`runLocked`, `callLocked` for routes) or a stream (`observeLocked`).
 */

/** Options shared by `withLock`, `@Locked` on providers and `@Locked` on routes. */
export interface RunLockedOptions extends WithLockOptions {
  onBusy?: OnBusyPolicy;
}

/** Whether the caller still listens; `signal` aborts when it leaves (for a waiting acquire). */
export interface CallerPresence {
  readonly left: boolean;
  readonly signal?: AbortSignal;
}

/**
 * Holds `key` while `fn` runs: joins a lock this call chain already holds (re-entrancy),
 * otherwise acquires; runs `fn` in a frame that carries its hold, and ends the hold after. The
 * last hold of a lock releases it. `fn`'s own errors pass through untouched; a lock lost while it
 * ran becomes `LockLostError` after it settles. Resolves `undefined` without running `fn` when
 * busy and `onBusy` is `'skip'`. A source that is not this package's `LockService` (a test
 * double) is used through its public `acquire` and `LockHandle` only.
 */
export function runLocked<T>(
  given: LockSource,
  key: LockTarget,
  options: RunLockedOptions,
  fn: (lock: LockHandle) => T | Promise<T>,
): Promise<T> {
  return holdWhile(given, key, options, fn) as Promise<T>;
}

/**
 * The Promise form of `observeLocked`, for HTTP route handlers locked without an interceptor:
 * `runLocked`, with `fn` given the call's `LockedCall` instead of the handle. Work `fn` records
 * on the call (a stream still being read) keeps the lock, renewed, past the answer; the release
 * follows once it has settled, and a loss then is reported by the engine. `mapError` shapes lock
 * failures only (the acquire's, a loss with `onLost: 'throw'`); `fn`'s own errors pass through
 * untouched. When the caller stops listening (`caller`, e.g. a timeout), a waiting acquire is
 * cancelled and a lock granted after it is released at once, without running `fn`, as
 * `observeLocked` does on unsubscribe.
 */
export function callLocked<T>(
  given: LockSource,
  key: LockTarget,
  options: RunLockedOptions,
  fn: (call: LockedCall) => T | Promise<T>,
  mapError: (error: unknown) => unknown = (error) => error,
  caller?: CallerPresence,
): Promise<T | undefined> {
  return holdWhile(given, key, options, fn, mapError, caller);
}

/**
 * The Promise form of both. A route's (given `mapError`, and `caller` if it can leave): `fn`
 * gets a `LockedCall` (work that outlives the answer) and the hold of a joined call ends in the
 * background, as a stream's does. Any other (no `mapError`): `fn` gets the handle, the hold's
 * end is always awaited (a joined call's loss included), and the work is traced as a `lock.hold`
 * span when a tracer provider is registered. Options are passed apart, not as one object: no
 * allocation per call for them.
 */
async function holdWhile<T, A extends LockHandle | LockedCall>(
  given: LockSource,
  key: LockTarget,
  options: RunLockedOptions,
  fn: (arg: A) => T | Promise<T>,
  mapError?: (error: unknown) => unknown,
  caller?: CallerPresence,
): Promise<T | undefined> {
  const locks = lockSourceFor(given);
  const parent = lockContext.getStore();
  // Joined synchronously, at call time: a caller that does not await this call cannot end the
  // last hold (and release) before this one counts.
  const joined = joinHeld(locks, key, options, parent);
  const hold = joined ?? (await acquireHold(locks, key, options, mapError, caller));
  if (!hold) return undefined;
  const call = mapError ? new LockedCall() : undefined;
  // `fn` is typed by the form: a route's is given its call, any other the hold's handle.
  const arg = (call ?? hold.handle) as A;
  const span = mapError
    ? undefined
    : locks.engine.lifecycle?.holdSpan(hold.lock, joined !== undefined);
  let result: T;
  try {
    result = await (span
      ? span.run(() => inFrame(parent, hold, fn, arg))
      : inFrame(parent, hold, fn, arg));
  } catch (error) {
    const lost = await endAfter(hold, call, joined !== undefined);
    span?.end({ error }, lost?.reason);
    throw error;
  }
  const lost = await endAfter(hold, call, joined !== undefined);
  span?.end(undefined, lost?.reason);
  const failure = lostToThrow(locks, options, lost);
  if (failure) throw mapError ? mapError(failure) : failure;
  return result;
}

/**
 * Ends the Promise form's hold. Waited for (and its loss returned) unless the work outlives the
 * answer, as `observeLocked` does: a route's joined hold, or work still held on its call, ends
 * in the background.
 */
function endAfter(
  hold: Hold,
  call: LockedCall | undefined,
  joined: boolean,
): Promise<LockLostError | undefined> | undefined {
  if (!call) return hold.end();
  if (joined || call.busy) {
    void endHold(hold, call);
    return undefined;
  }
  return endHold(hold, call);
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
      subscriber.add(() => void endHold(joined, call));
      return inFrame(parent, joined, (held) => source(held).subscribe(subscriber), call);
    }

    let hold: Hold | undefined;
    let call: LockedCall | undefined;
    let inner: Subscription | undefined;
    let closed = false;
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
      const ending = hold;
      hold = undefined;
      if (!ending || !call) return;
      if (call.busy) {
        // Work for the key outlives the stream (a response still being sent, an ack not yet
        // called): answer now, release once it is done. A loss then is reported by the engine.
        if (failed) subscriber.error(error);
        else subscriber.complete();
        void endHold(ending, call);
        return;
      }
      const lost = await endHold(ending, call);
      if (failed) subscriber.error(error);
      else {
        const failure = lostToThrow(locks, options, lost);
        if (failure) failWith(failure);
        else subscriber.complete();
      }
    };

    // Cancels a waiting acquire when the subscriber leaves; a fail-fast one (wait 0) needs none,
    // and a grant that lands after the subscriber left is released below anyway.
    const leave = (options.wait ?? locks.options.wait) > 0 ? new AbortController() : undefined;
    acquireOrSkip(locks, key, withLeave(options, leave?.signal)).then(
      (acquired) => {
        if (!acquired) return subscriber.complete();
        if (closed) return void releaseQuietly(acquired);
        const started = Hold.of(acquired);
        const startedCall = new LockedCall();
        hold = started;
        call = startedCall;
        inFrame(
          parent,
          started,
          (held) => {
            try {
              inner = source(held).subscribe({
                next: (value) => subscriber.next(value),
                error: (error: unknown) => void finish(error, true),
                complete: () => void finish(),
              });
            } catch (error) {
              void finish(error, true);
            }
          },
          startedCall,
        );
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
      const ending = hold;
      hold = undefined;
      // Teardown has run; the held work (a promise that cannot be cancelled) still holds the key.
      if (ending && call) void endHold(ending, call);
    };
  });
}

/**
 * Acquires `key` for the Promise form as a first hold, or resolves `null` when busy and skipped,
 * or (a route's, given `mapError`) when the caller left while it was being taken: nobody hears
 * the call, so nothing runs, and the lock is released at once. Its lock failures go through
 * `mapError`.
 */
async function acquireHold(
  locks: ServiceLockSource,
  key: LockTarget,
  options: RunLockedOptions,
  mapError: ((error: unknown) => unknown) | undefined,
  caller: CallerPresence | undefined,
): Promise<Hold | null> {
  if (!mapError) {
    const lease = await acquireOrSkip(locks, key, options);
    return lease && Hold.of(lease);
  }
  let lease: HeldLease | null;
  try {
    lease = await acquireOrSkip(locks, key, withLeave(options, caller?.signal));
  } catch (error) {
    throw mapError(error);
  }
  if (!lease) return null;
  if (caller?.left) {
    void releaseQuietly(lease);
    return null;
  }
  return Hold.of(lease);
}

/** Runs `fn(arg)` in a child of `parent` whose innermost hold is `hold`: what nested calls see. */
function inFrame<A, R>(parent: LockFrame | undefined, hold: Hold, fn: (arg: A) => R, arg: A): R {
  return lockContext.run(frameWith(parent, hold), fn, arg);
}

/**
 * Ends one call's hold: waits for the work the call still holds (the lock keeps being renewed
 * meanwhile), then ends the hold: its handle's signal aborts, and the last hold releases.
 * Never rejects.
 */
function endHold(hold: Hold, call: LockedCall): Promise<LockLostError | undefined> {
  if (!call.busy) {
    // Nothing outlives the call: abort at once, within teardown, so work that checks it stops.
    // Ended without waiting for the call to drain: a promise fewer per route call.
    hold.handle.end();
    call.close();
    return hold.end();
  }
  return call.drain().then(() => hold.end());
}

/** The loss to answer with after the work, when `onLost` says to throw it. */
function lostToThrow(
  locks: ServiceLockSource,
  options: RunLockedOptions,
  lost: LockLostError | undefined,
): LockLostError | undefined {
  return lost && (options.onLost ?? locks.options.onLost) === 'throw' ? lost : undefined;
}

/** `options` with `left` cancelling the acquire too. */
function withLeave(options: RunLockedOptions, left: AbortSignal | undefined): RunLockedOptions {
  if (!left) return options;
  const signal = options.signal ? AbortSignal.any([options.signal, left]) : left;
  return { ...options, signal };
}

/**
 * Acquires `key`, or resolves `null` when it is busy and `onBusy` is `'skip'`. A lock already lost
 * when it is granted (its lease ran out before the grant's answer arrived) is released and its
 * loss thrown: the work never starts under an aborted signal.
 */
async function acquireOrSkip(
  locks: ServiceLockSource,
  key: LockTarget,
  options: RunLockedOptions,
): Promise<HeldLease | null> {
  const lease = await leaseOrSkip(locks, key, options);
  // `expireIfDue`, not the signal: a lock's AbortSignal is made on first read, and most are
  // released without anyone reading it.
  if (lease?.expireIfDue()) {
    await releaseQuietly(lease);
    throw lease.signal.reason;
  }
  return lease;
}

async function leaseOrSkip(
  locks: ServiceLockSource,
  key: LockTarget,
  options: RunLockedOptions,
): Promise<HeldLease | null> {
  try {
    // A source `lockSourceFor` returned: the engine's `HeldLock` or `MultiLock`, or a double's
    // `HandleLease`.
    const handle = await (isKeyList(key)
      ? locks.acquire(key, options)
      : locks.acquire(key, options));
    const acquired = handle as Partial<HeldLease> & LockHandle;
    // A real service whose `acquire` was replaced (a spy, a subclass) may hand back a plain handle.
    if (acquired && acquired.owner === locks.engine) return acquired as HeldLease;
    if (!isKeyList(key)) {
      const frameKey = frameKeyOf(locks, key, options);
      return new HandleLease(
        acquired,
        key,
        locks.engine,
        frameKey,
        undefined,
        leaseKindOf(options),
      );
    }
    const names = key.map((one) => locks.engine.keysOf(one).lock);
    return new HandleLease(acquired, key.join(', '), locks.engine, names[0] ?? '', names);
  } catch (error) {
    if (
      error instanceof LockNotAcquiredError &&
      (options.onBusy ?? locks.options.onBusy) === 'skip'
    ) {
      return null;
    }
    throw error;
  }
}
