import { acquireOrSkip, endHold, type HeldCall } from './held-call';
import { Hold, releaseQuietly } from './holds';
import { joinHeld } from './join-held';
import { frameWith, lockContext } from './lock-context';
import { LockedCall } from './locked-call';
import type { LockSource, LockTarget } from './lock-source';
import { lockSourceFor } from './public-lock-source';
import type { RunLockedOptions } from './run-locked-options';

/**
 * The Promise form of `observeLocked`, for HTTP route handlers locked without an interceptor:
 * joins a lock this call chain holds or takes it, runs `fn` under it with the call's
 * `LockedCall`, and settles as `fn` does. Work `fn` records on the call (a stream still being
 * read) keeps the lock, renewed, past that answer; the release follows once it has settled, and a
 * loss then is reported by the engine. Resolves `undefined` without running `fn` when busy and
 * `onBusy` is `'skip'`. `mapError` shapes lock failures only (the acquire's, a loss with
 * `onLost: 'throw'`); `fn`'s own errors pass through untouched. When the caller stops listening
 * (`caller`, e.g. a timeout), a waiting acquire is cancelled and a lock granted after it is
 * released at once, without running `fn`, as `observeLocked` does on unsubscribe.
 */
export async function callLocked<T>(
  given: LockSource,
  key: LockTarget,
  options: RunLockedOptions,
  fn: (call: LockedCall) => T | Promise<T>,
  mapError: (error: unknown) => unknown = (error) => error,
  caller?: CallerPresence,
): Promise<T | undefined> {
  const locks = lockSourceFor(given);
  const parent = lockContext.getStore();
  // Joined synchronously, at call time, as `runLocked` does: a caller that does not await this
  // call cannot end the last hold (and release) before this one counts.
  const joined = joinHeld(locks, key, options, parent);
  let held: HeldCall;
  if (joined) {
    held = { hold: joined, call: new LockedCall() };
  } else {
    let acquired;
    try {
      acquired = await acquireOrSkip(locks, key, withLeave(options, caller?.signal));
    } catch (error) {
      throw mapError(error);
    }
    if (!acquired) return undefined;
    // The caller left while the lock was being taken: nobody hears this call, so nothing runs.
    if (caller?.left) {
      void releaseQuietly(acquired);
      return undefined;
    }
    held = { hold: Hold.of(acquired), call: new LockedCall() };
  }
  const own = held;
  let result: T;
  try {
    result = await lockContext.run(frameWith(parent, own.hold), () => fn(own.call));
  } catch (error) {
    await endAfterAnswer(own, !joined);
    throw error;
  }
  const lost = await endAfterAnswer(own, !joined);
  if (lost && (options.onLost ?? locks.options.onLost) === 'throw') throw mapError(lost);
  return result;
}

/**
 * Ends the call's hold once its work is done. Waited for (and its loss returned) only when this
 * call acquired the lock and nothing it holds outlives the answer, as `observeLocked` does: a
 * joined hold, or work still being sent, ends in the background.
 */
async function endAfterAnswer(held: HeldCall, acquired: boolean) {
  if (!acquired || held.call.busy) {
    void endHold(held);
    return undefined;
  }
  return endHold(held);
}

/** Whether the caller still listens; `signal` aborts when it leaves (for a waiting acquire). */
export interface CallerPresence {
  readonly left: boolean;
  readonly signal?: AbortSignal;
}

/** `options` with `left` cancelling the acquire too. */
function withLeave(options: RunLockedOptions, left: AbortSignal | undefined): RunLockedOptions {
  if (!left) return options;
  const signal = options.signal ? AbortSignal.any([options.signal, left]) : left;
  return { ...options, signal };
}
