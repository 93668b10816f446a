import type { LockHandle } from '../engine/lock-handle';
import { LockNotAcquiredError, type LockLostError } from '../errors/errors';
import { leaseKindOf } from '../options/permits-option';
import { HandleLease } from './handle-lease';
import type { HeldLease } from './held-lease';
import { releaseQuietly, type Hold } from './holds';
import { frameKeyOf } from './lease-frames';
import type { LockedCall } from './locked-call';
import { isKeyList, type LockSource, type LockTarget } from './lock-source';
import type { RunLockedOptions } from './run-locked-options';

/**
 * The core both forms of a locked call share — the Observable one (`observeLocked`: streams,
 * interceptor-locked handlers) and the Promise one (`callLocked`: HTTP routes locked without an
 * interceptor): how the lock is taken, and how one call's hold ends once its work is done.
 */

/** One call's hold: its counted hold (and the handle its work sees), and the work it holds. */
export interface HeldCall {
  readonly hold: Hold;
  readonly call: LockedCall;
}

/**
 * Ends a call's hold: waits for the work the call still holds (the lock keeps being renewed
 * meanwhile), then ends the hold: its handle's signal aborts, and the last hold releases.
 * Never rejects.
 */
export async function endHold({ hold, call }: HeldCall): Promise<LockLostError | undefined> {
  // Nothing outlives the call: abort at once, within teardown, so work that checks it stops.
  if (!call.busy) hold.handle.end();
  await call.drain();
  return hold.end();
}

/**
 * Acquires `key`, or resolves `null` when it is busy and `onBusy` is `'skip'`. A lock already lost
 * when it is granted (its lease ran out before the grant's answer arrived) is released and its
 * loss thrown: the work never starts under an aborted signal.
 */
export async function acquireOrSkip(
  locks: LockSource,
  key: LockTarget,
  options: RunLockedOptions,
): Promise<HeldLease | null> {
  const lease = await leaseOrSkip(locks, key, options);
  if (lease?.signal.aborted) {
    await releaseQuietly(lease);
    throw lease.signal.reason;
  }
  return lease;
}

async function leaseOrSkip(
  locks: LockSource,
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
