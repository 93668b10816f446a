/**
 * `@Locked` and `withLock` take a real LockService's locks directly and a test double's through
 * its public API. A second copy of the package must still re-enter a lock the first holds, and a
 * real service whose `acquire` was replaced (a spy) must not crash or strand its handle.
 */
import { randomUUID } from 'node:crypto';
import { LockService, type LockHandle } from 'nestjs-redis-lock';
import { runLocked } from '../lib/locking/run-locked';
import { SHARED_REDIS_URL } from './support/shared-redis';

const redis = SHARED_REDIS_URL;

describe('the lock source paths', () => {
  let service: LockService;
  beforeEach(() => {
    service = new LockService({ redis, prefix: `review-dual:${randomUUID()}:` });
  });
  afterEach(() => service.close());

  it('a second copy of the package (another module registry) re-enters a lock the first copy holds', async () => {
    // Another copy of the library, as an ESM and a CJS build (or two node_modules copies) are.
    let otherRunLocked!: typeof runLocked;
    jest.isolateModules(() => {
      type RunLockedModule = typeof import('../lib/locking/run-locked');
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const other = require('../lib/locking/run-locked') as RunLockedModule;
      otherRunLocked = other.runLocked;
    });
    expect(otherRunLocked).not.toBe(runLocked);
    // The brand is Symbol.for: the other copy takes this service as its own (the fast path).
    const inner = await service.withLock('k', () =>
      otherRunLocked(service, 'k', { onBusy: 'throw' }, () => 'inner ran'),
    );
    expect(inner).toBe('inner ran');
  });

  it('a real LockService whose acquire is spied on with a stand-in handle still runs the method', async () => {
    const fake: LockHandle = {
      key: 'k',
      token: 't',
      fence: 1,
      validUntil: Date.now() + 10_000,
      isHeld: true,
      signal: new AbortController().signal,
      extend: async () => undefined,
      release: async () => true,
      [Symbol.asyncDispose]: async () => undefined,
    };
    jest.spyOn(service, 'acquire').mockResolvedValue(fake);
    await expect(runLocked(service, 'k', { onBusy: 'throw' }, () => 'ran')).resolves.toBe('ran');
  });
});
