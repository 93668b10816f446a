import { SemaphoreLimitConflictError } from '../../errors/errors';
import { lockRedisKeys } from '../../keys/lock-keys';
import { MemoryLockBackend } from '../../backends/memory.backend';

/** Lets promise jobs run (release messages are delivered on one). */
const flush = async (): Promise<void> => {
  for (let i = 0; i < 5; i++) await Promise.resolve();
};

const keys = lockRedisKeys('lock:', 'k', { type: 'semaphore', permits: 2 });

describe('MemoryLockBackend: fair semaphores (fake timers drive its clock)', () => {
  let backend: MemoryLockBackend;
  let heard: string[];

  beforeEach(async () => {
    jest.useFakeTimers();
    backend = new MemoryLockBackend({ fenceRetention: 1_000 });
    heard = [];
    const pubsub = backend.createPubSub();
    pubsub.onMessage((_, message) => heard.push(message));
    await pubsub.subscribe(keys.channel);
  });

  afterEach(() => jest.useRealTimers());

  const fair = (token: string, { queue = true, ttl = 1_000, waiterTtl = 300, on = keys } = {}) =>
    backend.fairAcquire(on, token, ttl, queue, waiterTtl);
  const fenceOf = async (token: string, options?: Parameters<typeof fair>[1]) =>
    ((await fair(token, options)) as { granted: number }).granted;

  it('grants N, queues the rest in arrival order, and hands a freed permit to the head', async () => {
    const a = await fenceOf('a');
    const b = await fenceOf('b');
    expect(b).toBe(a + 1);
    jest.advanceTimersByTime(100);
    expect(await fair('c')).toEqual({ retryAfterMs: 900, fence: b });
    expect(await fair('d')).toEqual({ retryAfterMs: 900, fence: b });
    expect(backend.queued(keys)).toEqual(['c', 'd']);

    expect(await backend.fairRelease(keys, 'a')).toBe(true);
    await flush();
    expect(heard).toEqual([`grant:c:${b + 1}`]);
    expect(backend.queued(keys)).toEqual(['d']);
    // c holds it: renewed like any permit; a newcomer finds no place while d queues.
    expect(await backend.extend(keys, 'c', 1_000)).toBe(true);
    expect(await fair('late', { queue: false })).toMatchObject({ retryAfterMs: 900 });
    // Already c's: granted anew with a fence of its own (the counter may be another holder's).
    expect(await fair('c')).toEqual({ granted: b + 2 });
  });

  it('hands the head a lease no longer than what is left of its entry', async () => {
    await fair('a');
    await fair('b');
    await fair('dead'); // entry until 300, never refreshed
    jest.advanceTimersByTime(200);
    expect(await backend.fairRelease(keys, 'a')).toBe(true);
    // Its hand-off lease is the 100 ms left of its entry: it ends in this ms, then lapses.
    jest.advanceTimersByTime(100);
    expect(await fair('next', { queue: false })).toMatchObject({ retryAfterMs: 0 });
    jest.advanceTimersByTime(1);
    expect(await fair('next', { queue: false })).toEqual({ granted: expect.any(Number) });
  });

  it('keeps a place freed by a lapse for the live head, until its entry lapses', async () => {
    await fair('a', { ttl: 100 });
    await fair('b', { ttl: 100 });
    await fair('head'); // entry until 300
    jest.advanceTimersByTime(150); // both leases ended unreleased
    expect(await fenceOf('first', { queue: false })).toBeGreaterThan(0);
    expect(await fair('second', { queue: false })).toEqual({
      retryAfterMs: 150, // when the head's entry lapses
      fence: expect.any(Number),
    });
    jest.advanceTimersByTime(151);
    expect(await fenceOf('second', { queue: false })).toBeGreaterThan(0);
    expect(backend.queued(keys)).toEqual([]);
  });

  it('passes over lapsed entries and those asking for another limit when it hands places on', async () => {
    const three = lockRedisKeys('lock:', 'k', { type: 'semaphore', permits: 3 });
    await fair('a');
    await fair('b');
    await fair('lapsing', { waiterTtl: 50 });
    await fair('live');
    jest.advanceTimersByTime(100);
    expect(await backend.fairRelease(keys, 'a')).toBe(true);
    await flush();
    expect(heard).toEqual([expect.stringMatching(/^grant:live:\d+$/)]);
    // Another N is refused while the key is held, queued or not.
    await expect(fair('other', { on: three })).rejects.toBeInstanceOf(SemaphoreLimitConflictError);
    expect(backend.queued(keys)).toEqual([]);
  });

  it('takes the limit from the first live waiter when no holder is left, for newcomers and hand-offs', async () => {
    const three = lockRedisKeys('lock:', 'k', { type: 'semaphore', permits: 3 });
    await fair('a', { ttl: 100 });
    await fair('b', { ttl: 100 });
    for (const waiter of ['w1', 'w2', 'w3']) await fair(waiter); // limit 2, entries until 300
    jest.advanceTimersByTime(150); // both leases ended unreleased: no holder
    // w1's limit, 2, stands: a newcomer naming 3 is refused, and does not queue.
    await expect(fair('x3', { on: three })).rejects.toBeInstanceOf(SemaphoreLimitConflictError);
    expect(backend.queued(keys)).toEqual(['w1', 'w2', 'w3']);
    expect(await backend.fairRelease(keys, 'nobody')).toBe(false); // w1's limit, 2, applies
    expect(backend.queued(keys)).toEqual(['w3']);
    expect(await backend.fairRelease(keys, 'w1')).toBe(true); // to w3
    expect(await backend.fairRelease(keys, 'w2')).toBe(true); // nobody left to hand to
    await flush();
    expect(heard.map((message) => message.replace(/:\d+$/, ''))).toEqual([
      'grant:w1',
      'grant:w2',
      'grant:w3',
      'w2',
    ]);
    expect(backend.queued(keys)).toEqual([]);
    await expect(fair('x3', { on: three })).rejects.toBeInstanceOf(SemaphoreLimitConflictError);
  });

  it('publishes the token when nobody waits, leaves the queue for a non-holder, and drops the queue once it lapsed', async () => {
    await fair('a');
    await fair('b');
    await fair('c');
    expect(await backend.fairRelease(keys, 'c')).toBe(false); // left the queue
    expect(backend.queued(keys)).toEqual([]);
    expect(await backend.fairRelease(keys, 'a')).toBe(true);
    expect(await fair('d')).toEqual({ granted: expect.any(Number) }); // nobody queues
    await fair('e');
    expect(backend.queued(keys)).toEqual(['e']);
    jest.advanceTimersByTime(301); // e never refreshed its entry
    expect(backend.queued(keys)).toEqual([]);
    expect(await backend.fairRelease(keys, 'b')).toBe(true);
    await flush();
    expect(heard).toEqual(['a', 'b']);
    expect(await backend.isLocked(keys)).toBe(true); // d
  });
});
