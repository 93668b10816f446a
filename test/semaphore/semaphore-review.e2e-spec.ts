/**
 * Semaphore findings of the adversarial review, each a scenario that failed before its fix: a
 * wake-up lost when two places free at once.
 */
import { RedisBackend } from '../../lib/backends/redis.backend';
import type { LockRedisKeys } from '../../lib/keys/lock-keys';
import { onSharedRedis } from '../support/lock-services';
import { Gate, now, sleep, waitFor } from '../support/time';

const { services } = onSharedRedis('semaphore-review');

afterEach(() => jest.restoreAllMocks());

describe('wake-ups when several places free at once', () => {
  it('hands a wake-up the winner no longer needs to the next waiter (two releases, two waiters)', async () => {
    const holder = services.create({ ttl: 10_000 });
    const waiting = services.create({ ttl: 10_000 });
    const held = await Promise.all([1, 2].map(() => holder.acquire('two-free', { permits: 2 })));
    // A waits first and sleeps towards its fallback: the holders' 10 s leases (renewed).
    const first = waiting.acquire('two-free', { permits: 2, wait: 8_000 });
    await sleep(200);

    // From here, the waiting service's tries on the key run in Redis at once, but the replies of
    // its 2nd and 3rd (B's second try, then A's try when woken) are held until the gate opens:
    // both waiters are then busy trying, not sleeping, while the two release messages arrive.
    const gate = new Gate();
    const executed: Promise<unknown>[] = [];
    const original = RedisBackend.prototype.acquire;
    let calls = 0;
    jest.spyOn(RedisBackend.prototype, 'acquire').mockImplementation(function (
      this: RedisBackend,
      keys: LockRedisKeys,
      token,
      ttl,
    ) {
      const reply = original.call(this, keys, token, ttl);
      if (this !== backendOf(waiting) || !keys.lock.includes('{two-free}')) return reply;
      calls++;
      if (calls < 2 || calls > 3) return reply;
      executed.push(reply);
      return reply.then(async (fence) => (await gate.opened, fence));
    });
    const second = waiting.acquire('two-free', { permits: 2, wait: 4_000 });
    await waitFor(() => executed.length === 1, 3_000); // B's second try: busy, reply held
    await executed[0];
    await Promise.all(held.map((lock) => lock.release())); // two places free: two messages
    await waitFor(() => executed.length === 2, 3_000); // A woken: its try granted, reply held
    await executed[1];
    await sleep(100); // the second message has arrived meanwhile
    const opened = now();
    gate.release();

    const a = await first;
    const b = await second;
    // Before the fix, B slept until its wait ran out (4 s; its fallback was the 10 s leases)
    // while a place stood free, and took it only on its last try.
    expect(now() - opened).toBeLessThan(2_000);
    await Promise.all([a, b].map((lock) => lock.release()));
  });
});

/** The backend a LockService runs on (its engine's), to tell its commands from another's. */
function backendOf(service: object): unknown {
  const engine = (service as { engine: { backend: unknown } }).engine;
  return engine.backend;
}
