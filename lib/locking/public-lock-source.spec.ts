import type { LockHandle } from '../engine/lock-handle';
import { LockLostError } from '../errors/errors';
import { DEFAULT_OPTIONS } from '../options/option-defaults';
import { HandleLease } from './handle-lease';
import { isInternalLockSource, lockSourceFor, markInternalLockSource } from './public-lock-source';

/** Stands in for `LockService`: a branded prototype, and an engine on each instance. */
class BrandedService {
  readonly engine = { keysOf: (key: string) => ({ lock: `lock:${key}` }) };
}
markInternalLockSource(BrandedService.prototype);

describe('lockSourceFor', () => {
  it('hands a branded service back as it is', () => {
    const service = new BrandedService();
    expect(lockSourceFor(service)).toBe(service);
  });

  it('adapts a double once, and an adapter is not adapted again', () => {
    const double = { acquire: jest.fn() };
    const adapter = lockSourceFor(double);
    expect(adapter).not.toBe(double);
    expect(lockSourceFor(double)).toBe(adapter);
    expect(lockSourceFor(adapter)).toBe(adapter);
  });

  it('treats a stub made from the branded prototype (no engine) as a double', () => {
    const stub = Object.create(BrandedService.prototype) as object;
    expect(isInternalLockSource(stub)).toBe(false);
  });

  it('takes the options the double has, the rest from the library defaults', () => {
    const adapter = lockSourceFor({ acquire: jest.fn(), options: { onBusy: 'skip' } });
    expect(adapter.options).toMatchObject({ onBusy: 'skip', onLost: DEFAULT_OPTIONS.onLost });
  });

  it('keeps two doubles apart in a call chain (their own re-entrancy keys)', () => {
    const one = lockSourceFor({ acquire: jest.fn() });
    const other = lockSourceFor({ acquire: jest.fn() });
    expect(one.engine.keysOf('k').lock).not.toBe(other.engine.keysOf('k').lock);
  });
});

describe('HandleLease', () => {
  it('reads a loss from the handle signal: its LockLostError, or not-owner for another reason', () => {
    const controller = new AbortController();
    const handle = { key: 'k', signal: controller.signal, isHeld: true } as LockHandle;
    const lease = new HandleLease(handle, 'k', {}, 'frame:k');
    expect(lease.lost).toBeUndefined();
    controller.abort(new Error('gone'));
    expect(lease.lost).toMatchObject({ key: 'k', reason: 'not-owner' });
    expect(lease.expireIfDue()).toBe(true);

    const lost = new LockLostError('k', 'deadline');
    const aborted = new HandleLease(
      { signal: AbortSignal.abort(lost) } as LockHandle,
      'k',
      {},
      'f',
    );
    expect(aborted.lost).toBe(lost);
    expect(aborted.isHeld).toBe(false);
  });

  it('reads a handle with nothing on it as held until released, released true', async () => {
    const lease = new HandleLease(undefined, 'k', {}, 'frame:k');
    expect([lease.isHeld, lease.signal.aborted, lease.fence]).toEqual([true, false, 0]);
    await expect(lease.release()).resolves.toBe(true);
  });
});
