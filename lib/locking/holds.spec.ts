import type { HeldLock } from '../engine/held-lock';
import { LockLostError } from '../errors/errors';
import { Hold } from './holds';

/** The parts of a held lock a hold reads, with `release` recorded. */
function fakeLock(): HeldLock & { held: boolean; lost?: LockLostError } {
  const state = { held: true };
  const lock = {
    key: 'order:1',
    lost: undefined as LockLostError | undefined,
    validUntil: Infinity,
    get held(): boolean {
      return state.held;
    },
    set held(value: boolean) {
      state.held = value;
    },
    get isHeld(): boolean {
      return state.held;
    },
    signal: new AbortController().signal,
    expireIfDue: (): boolean => !state.held,
    release: jest.fn(async (): Promise<boolean> => state.held),
    reportHoldLost: jest.fn(),
  };
  return lock as unknown as HeldLock & { held: boolean; lost?: LockLostError };
}

describe('Hold', () => {
  it('releases the lock when the last of its holds ends, in any order', async () => {
    const lock = fakeLock();
    const outer = Hold.of(lock);
    const inner = outer.join();
    const nested = inner.join();

    expect(await outer.end()).toBeUndefined();
    expect(await nested.end()).toBeUndefined();
    expect(lock.release).not.toHaveBeenCalled();
    expect(await inner.end()).toBeUndefined();
    expect(lock.release).toHaveBeenCalledTimes(1);
  });

  it('counts a hold once however often it is ended', async () => {
    const lock = fakeLock();
    const outer = Hold.of(lock);
    const inner = outer.join();
    await outer.end();
    await outer.end();
    expect(lock.release).not.toHaveBeenCalled();
    await inner.end();
    expect(lock.release).toHaveBeenCalledTimes(1);
  });

  it('stops counting as active once ended, or once its lock is no longer held', async () => {
    const lock = fakeLock();
    const outer = Hold.of(lock);
    const inner = outer.join();
    await inner.end();
    expect(inner.active).toBe(false);
    expect(inner.settled).toBe(true);
    expect(outer.active).toBe(true);
    lock.held = false;
    expect(outer.active).toBe(false);
  });

  it('reports a loss to a hold that is not the last one', async () => {
    const lock = fakeLock();
    const outer = Hold.of(lock);
    const inner = outer.join();
    lock.held = false;
    lock.lost = new LockLostError(lock.key, 'not-owner');
    expect(await outer.end()).toBeInstanceOf(LockLostError);
    expect(lock.release).not.toHaveBeenCalled();
    expect(await inner.end()).toBeInstanceOf(LockLostError);
    expect(lock.release).toHaveBeenCalledTimes(1);
  });

  it('ends only its own hold on release(), and resolves what the first end resolved', async () => {
    const lock = fakeLock();
    const outer = Hold.of(lock);
    const inner = outer.join();
    expect(await inner.handle.release()).toBe(true);
    expect(inner.handle.isHeld).toBe(false);
    expect(inner.handle.signal.aborted).toBe(true);
    expect(outer.handle.isHeld).toBe(true);
    expect(outer.handle.signal.aborted).toBe(false);
    expect(lock.release).not.toHaveBeenCalled();
    expect(await inner.end()).toBeUndefined();
    expect(await outer.handle.release()).toBe(true);
    expect(lock.release).toHaveBeenCalledTimes(1);
  });

  it('does not report a lock released on purpose as lost', async () => {
    const lock = fakeLock();
    const hold = Hold.of(lock);
    expect(await hold.handle.release()).toBe(true);
    lock.held = false; // released
    expect(await hold.end()).toBeUndefined();
  });

  it('ends a joined hold at its own maxHold, and releases if it is the last', async () => {
    jest.useFakeTimers();
    try {
      const lock = fakeLock();
      const outer = Hold.of(lock);
      const inner = outer.join(200);
      await outer.end();
      jest.advanceTimersByTime(200);
      expect(inner.settled).toBe(true);
      expect(inner.handle.signal.reason).toMatchObject({ reason: 'max-hold' });
      const lost = await inner.end();
      expect(lost).toBeInstanceOf(LockLostError);
      expect(lost?.reason).toBe('max-hold');
      expect(lock.release).toHaveBeenCalledTimes(1);
      // A hold ending at its own bound is a loss its work must hear of, not a silent end.
      expect(lock.reportHoldLost).toHaveBeenCalledWith(lost, inner.handle);
    } finally {
      jest.useRealTimers();
    }
  });
});
