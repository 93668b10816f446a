import { MemoryLockBackend } from '../backends/memory.backend';
import { LockKeyError, RedisLockConfigError } from '../errors/errors';
import { LockService } from './lock.service';

describe('new LockService()', () => {
  it('checks its options before it opens any connection', () => {
    let created: LockService | undefined;
    // Never connected to: the bad ttl is refused first.
    const redis = 'redis://127.0.0.1:6379';
    expect(() => (created = new LockService({ redis, ttl: 0 }))).toThrow(RedisLockConfigError);
    void created?.close();
  });
});

describe('LockService.acquire', () => {
  // The acquire path is written as plain promise chains for speed: a call it refuses before
  // anything is sent must still reject, as an async function would, and never throw.
  const backend = new MemoryLockBackend();
  const locks = new LockService({}, { backend, closedByService: true });
  afterAll(() => locks.close());

  it('rejects a bad key rather than throwing it', async () => {
    let call: Promise<unknown> | undefined;
    expect(() => (call = locks.acquire(''))).not.toThrow();
    await expect(call).rejects.toBeInstanceOf(LockKeyError);
  });

  it('rejects for a signal aborted before the call rather than throwing', async () => {
    const signal = AbortSignal.abort(new Error('cancelled'));
    let call: Promise<unknown> | undefined;
    expect(() => (call = locks.acquire('free', { signal }))).not.toThrow();
    await expect(call).rejects.toThrow('cancelled');
    expect(await locks.isLocked('free')).toBe(false);
  });

  it('releases through the same chain, once', async () => {
    const lock = await locks.acquire('once');
    const first = lock.release();
    expect(lock.release()).toBe(first);
    await expect(first).resolves.toBe(true);
    expect(await locks.isLocked('once')).toBe(false);
  });
});
