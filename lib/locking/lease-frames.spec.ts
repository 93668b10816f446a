import type { LockHandle } from '../engine/lock-handle';
import {
  LockUpgradeError,
  RedisLockConfigError,
  SemaphoreLimitConflictError,
} from '../errors/errors';
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
  it('keeps every kind of lock on one key under one frame name, and validates permits', () => {
    const source = lockSourceFor(double());
    const mutex = frameKeyOf(source, 'k', {});
    expect(frameKeyOf(source, 'k', { permits: 3 })).toBe(mutex);
    expect(frameKeyOf(source, 'k', { mode: 'read' })).toBe(mutex);
    // Another key names another frame.
    expect(frameKeyOf(source, 'permits:k', { permits: 3 })).not.toBe(mutex);
    expect(() => frameKeyOf(source, 'k', { permits: 0 })).toThrow(RedisLockConfigError);
  });

  it('re-uses a held permit in a nested call through a double', async () => {
    const given = double();
    const source = lockSourceFor(given);
    const tokens: string[] = [];
    await runLocked(source, 'k', { permits: 2 }, async (outer) => {
      tokens.push(outer.token);
      await runLocked(source, 'k', { permits: 2 }, (inner) => void tokens.push(inner.token));
    });
    expect(tokens).toEqual(['t1', 't1']);
    expect(given.acquire).toHaveBeenCalledTimes(1);
    expect(given.acquire.mock.calls[0]![1]).toMatchObject({ permits: 2 });
  });

  const kinds = {
    mutex: {},
    read: { mode: 'read' },
    permit: { permits: 2 },
  } as const;
  type Kind = keyof typeof kinds;
  // A call that would wait for its own chain's lock on the name: refused, acquiring nothing.
  const refused: [outer: Kind, inner: Kind][] = [
    ['mutex', 'permit'],
    ['permit', 'mutex'],
    ['read', 'permit'],
    ['permit', 'read'],
    ['read', 'mutex'],
  ];
  it.each(refused)(
    'refuses a %s call chain a nested %s on the same key (LockUpgradeError)',
    async (outer, inner) => {
      const given = double();
      const source = lockSourceFor(given);
      await runLocked(source, 'k', kinds[outer], async () => {
        const nested = runLocked(source, 'k', kinds[inner], () => 'ran');
        await expect(nested).rejects.toBeInstanceOf(LockUpgradeError);
        await expect(nested).rejects.toMatchObject({ key: 'k' });
        // Control: the same call on another key is granted.
        await expect(runLocked(source, 'other', kinds[inner], () => 'ran')).resolves.toBe('ran');
      });
      expect(given.acquire).toHaveBeenCalledTimes(2);
    },
  );

  it('names both kinds in the refusal and says what to do', async () => {
    const source = lockSourceFor(double());
    await runLocked(source, 'k', {}, async () => {
      await expect(runLocked(source, 'k', { permits: 2 }, () => undefined)).rejects.toThrow(
        /as a mutex \(or write lock\).*as a permit of a semaphore.*one kind of lock on the name/s,
      );
    });
  });

  it('lets a read join the write its chain holds, as before', async () => {
    const given = double();
    const source = lockSourceFor(given);
    const tokens: string[] = [];
    await runLocked(source, 'k', {}, async (outer) => {
      tokens.push(outer.token);
      await runLocked(source, 'k', { mode: 'read' }, (inner) => void tokens.push(inner.token));
    });
    expect(tokens).toEqual(['t1', 't1']);
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
