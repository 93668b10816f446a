/**
 * Review findings on read-write locks, each a test that failed before its fix: fair mode's
 * writer that gives up wakes the readers it held back.
 */
import { onSharedRedis } from '../support/lock-services';
import { now, waitFor } from '../support/time';

const { prefix, redis, services } = onSharedRedis('rw-review');

describe('fair mode', () => {
  it('frees the readers at once when a queued writer gives up', async () => {
    const fair = services.create({ fair: true, ttl: 2_000 });
    const fair2 = services.create({ fair: true, ttl: 2_000 });
    const r1 = await fair.acquire('doc:1', { mode: 'read' });
    // The writer gives up when told to, not after a budget the machine's load could outrun before
    // the test sees it queued.
    const giveUp = new AbortController();
    const writer = fair2.acquire('doc:1', { wait: 30_000, signal: giveUp.signal });
    await waitFor(async () => (await redis.zcard(`${prefix}{doc:1}:queue`)) === 1);
    // Refused while the writer queues; its fallback is the queue's lifetime (4 s by default).
    let r2Settled = false;
    const r2 = fair.acquire('doc:1', { mode: 'read', wait: 10_000 });
    void r2.finally(() => (r2Settled = true));
    expect(await fair.tryAcquire('doc:1', { mode: 'read' })).toBeNull(); // held back, as r2 is
    expect(r2Settled).toBe(false);
    const gaveUp = now();
    giveUp.abort();
    await expect(writer).rejects.toThrow();
    const held = await r2;
    // Woken when the writer leaves the queue, not when the queue lapses.
    expect(now() - gaveUp).toBeLessThan(1_500);
    await Promise.all([r1.release(), held.release()]);
  });
});
