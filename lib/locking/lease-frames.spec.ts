import type { LockHandle } from '../engine/lock-handle';
import { RedisLockConfigError, SemaphoreLimitConflictError } from '../errors/errors';
import { runLocked } from './run-locked';
import { lockSourceFor } from './public-lock-source';
import { frameKeyOf } from './lease-frames';

/** A test double of LockService: every acquire succeeds with a fresh handle. */
function double() {
  let next = 0;
  const acquire = jest.fn(
    async (key: string, _options: object): Promise<LockHandle> =>
      ({
        key,
        token: `t${++next}`,
        fence: next,
        release: async () => true,
      }) as unknown as LockHandle,
  );
  return { acquire };
}

describe('frames of permit holds', () => {
  it('keeps a semaphore and the mutex on one key apart, and validates permits', () => {
    const source = lockSourceFor(double());
    expect(frameKeyOf(source, 'k', { permits: 3 })).not.toBe(frameKeyOf(source, 'k', {}));
    // No mutex key names a semaphore's frame, nor the reverse.
    expect(frameKeyOf(source, 'permits:k', {})).not.toBe(frameKeyOf(source, 'k', { permits: 3 }));
    expect(frameKeyOf(source, '\0k', {})).not.toBe(frameKeyOf(source, 'k', { permits: 3 }));
    expect(() => frameKeyOf(source, 'k', { permits: 0 })).toThrow(RedisLockConfigError);
  });

  it('re-uses a held permit in a nested call through a double, and never the mutex', async () => {
    const given = double();
    const source = lockSourceFor(given);
    const tokens: string[] = [];
    await runLocked(source, 'k', { permits: 2 }, async (outer) => {
      tokens.push(outer.token);
      await runLocked(source, 'k', { permits: 2 }, (inner) => void tokens.push(inner.token));
      await runLocked(source, 'k', {}, (mutex) => void tokens.push(mutex.token));
    });
    expect(tokens).toEqual(['t1', 't1', 't2']);
    expect(given.acquire).toHaveBeenCalledTimes(2);
    expect(given.acquire.mock.calls[0]![1]).toMatchObject({ permits: 2 });
  });
});

describe('SemaphoreLimitConflictError', () => {
  it('is a RedisLockConfigError that carries both limits', () => {
    const error = new SemaphoreLimitConflictError('m', 2, 3);
    expect(error).toBeInstanceOf(RedisLockConfigError);
    expect(error).toMatchObject({
      name: 'SemaphoreLimitConflictError',
      heldPermits: 2,
      requestedPermits: 3,
    });
  });
});
