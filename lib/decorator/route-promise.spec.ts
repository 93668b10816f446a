import { StreamableFile } from '@nestjs/common';
import { Readable } from 'node:stream';
import { MemoryLockBackend } from '../backends/memory.backend';
import { LockNotAcquiredError } from '../errors/errors';
import { currentLock } from '../locking/lock-context';
import { LockService } from '../service/lock.service';
import { lockRouteCall } from './route-promise';

/** The Promise form of a route's lock (`callLocked` under `lockRouteCall`), on the memory backend. */
describe('lockRouteCall', () => {
  const backend = new MemoryLockBackend();
  const locks = new LockService({}, { backend, closedByService: true });
  afterAll(() => locks.close());
  const present = { left: false };
  const unmapped = (error: unknown): unknown => error;

  it('runs the handler under the lock, then releases it', async () => {
    let inside: { key?: string; held: boolean } | undefined;
    const answer = await lockRouteCall(
      locks,
      'order:1',
      {},
      async () => {
        inside = { key: currentLock()?.key, held: await locks.isLocked('order:1') };
        return { ok: true };
      },
      undefined,
      unmapped,
      present,
    );
    expect(answer).toEqual({ ok: true });
    expect(inside).toEqual({ key: 'order:1', held: true });
    expect(await locks.isLocked('order:1')).toBe(false);
  });

  it("passes the handler's own error through untouched, and releases", async () => {
    const own = new Error('handler failed');
    const mapError = jest.fn(unmapped);
    const call = lockRouteCall(
      locks,
      'order:2',
      {},
      async () => {
        throw own;
      },
      undefined,
      mapError,
      present,
    );
    await expect(call).rejects.toBe(own);
    expect(mapError).not.toHaveBeenCalled();
    expect(await locks.isLocked('order:2')).toBe(false);
  });

  it('maps a busy key, and skips without running when onBusy is skip', async () => {
    const other = await locks.acquire('order:3');
    const run = jest.fn(async () => 'ran');
    const mapped = new Error('mapped');
    const busy = lockRouteCall(locks, 'order:3', {}, run, undefined, () => mapped, present);
    await expect(busy).rejects.toBe(mapped);
    const skipped = lockRouteCall(locks, 'order:3', { onBusy: 'skip' }, run, undefined, unmapped, {
      left: false,
    });
    await expect(skipped).resolves.toBeUndefined();
    expect(run).not.toHaveBeenCalled();
    await other.release();
  });

  it('CONTROL: the busy mapping sees LockNotAcquiredError', async () => {
    const other = await locks.acquire('order:4');
    const seen: unknown[] = [];
    const call = lockRouteCall(
      locks,
      'order:4',
      {},
      async () => 'ran',
      undefined,
      (error) => seen.push(error),
      present,
    );
    await expect(call).rejects.toBe(1);
    expect(seen[0]).toBeInstanceOf(LockNotAcquiredError);
    await other.release();
  });

  it('holds the key of a StreamableFile until its stream ended', async () => {
    const stream = new Readable({ read: () => undefined });
    const answer = await lockRouteCall(
      locks,
      'file:1',
      {},
      async () => new StreamableFile(stream),
      undefined,
      unmapped,
      present,
    );
    expect(answer).toBeInstanceOf(StreamableFile);
    expect(await locks.isLocked('file:1')).toBe(true);
    stream.push(null);
    stream.resume();
    await new Promise((resolve) => stream.once('end', resolve));
    const deadline = Date.now() + 2_000;
    while ((await locks.isLocked('file:1')) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    expect(await locks.isLocked('file:1')).toBe(false);
  });

  it('joins a lock the call chain already holds instead of waiting for itself', async () => {
    const answer = await locks.withLock('order:5', () =>
      lockRouteCall(locks, 'order:5', {}, async () => 'nested', undefined, unmapped, present),
    );
    expect(answer).toBe('nested');
    expect(await locks.isLocked('order:5')).toBe(false);
  });

  it('does not run the handler when the caller left while the lock was being taken', async () => {
    const other = await locks.acquire('order:6');
    const leave = new AbortController();
    const caller = {
      get left(): boolean {
        return leave.signal.aborted;
      },
      signal: leave.signal,
    };
    const run = jest.fn(async () => 'ran');
    const call = lockRouteCall(locks, 'order:6', { wait: 5_000 }, run, undefined, unmapped, caller);
    leave.abort();
    await expect(call).rejects.toBeDefined();
    await other.release();
    expect(run).not.toHaveBeenCalled();
    expect(await locks.isLocked('order:6')).toBe(false);
  });
});
