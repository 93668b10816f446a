import { lockRedisKeys } from '../keys/lock-keys';
import { MemoryLockBackend } from './memory.backend';

/** Lets promise jobs run (release messages are delivered on one). */
const flush = async (): Promise<void> => {
  for (let i = 0; i < 5; i++) await Promise.resolve();
};

const keys = lockRedisKeys('lock:', 'k');

describe('MemoryLockBackend (fake timers drive its clock)', () => {
  let backend: MemoryLockBackend;
  let heard: string[];

  beforeEach(async () => {
    jest.useFakeTimers();
    backend = new MemoryLockBackend({ fenceRetention: 1_000 });
    heard = [];
    const pubsub = backend.createPubSub();
    pubsub.onMessage((channel, message) => heard.push(`${channel} ${message}`));
    await pubsub.subscribe(keys.channel);
  });

  afterEach(() => jest.useRealTimers());

  describe('acquire', () => {
    it('grants a free lock with a fence > 0, and answers -(PTTL) to another token', async () => {
      const fence = await backend.acquire(keys, 'a', 1_000);
      expect(fence).toBeGreaterThan(0);
      jest.advanceTimersByTime(300);
      expect(await backend.acquire(keys, 'b', 1_000)).toBe(-700);
      expect(backend.holder(keys)).toBe('a');
    });

    it('answers its own grant again with the same fence (a re-sent command)', async () => {
      const fence = await backend.acquire(keys, 'a', 1_000);
      expect(await backend.acquire(keys, 'a', 1_000)).toBe(fence);
    });

    it('keeps the lease through its last millisecond (busy, PTTL 0), and frees it after', async () => {
      await backend.acquire(keys, 'a', 1_000);
      jest.advanceTimersByTime(1_000);
      expect(await backend.acquire(keys, 'b', 1_000)).toBe(0);
      expect(Object.is(await backend.acquire(keys, 'b', 1_000), 0)).toBe(true); // not -0
      jest.advanceTimersByTime(1);
      expect(await backend.isLocked(keys)).toBe(false);
      expect(await backend.acquire(keys, 'b', 1_000)).toBeGreaterThan(0);
    });

    it('counts fences up while the counter lives, and restarts above them once it lapsed', async () => {
      const first = await backend.acquire(keys, 'a', 100);
      jest.advanceTimersByTime(101);
      const second = await backend.acquire(keys, 'b', 100);
      expect(second).toBe(first + 1);
      jest.advanceTimersByTime(100 + 1_000 + 1); // lease + fenceRetention: the counter is gone
      const third = await backend.acquire(keys, 'c', 100);
      expect(third).toBeGreaterThan(second + 1);
    });

    it('refuses a lease that is not a whole number of ms, as Redis does', async () => {
      await expect(backend.acquire(keys, 'a', 10.5)).rejects.toThrow(/not an integer/);
      await expect(backend.acquire(keys, 'a', 0)).rejects.toThrow(/not an integer/);
      expect(await backend.isLocked(keys)).toBe(false);
    });
  });

  describe('extend and renewMany', () => {
    it('extends its own lease from now, and refuses another token or a lapsed lease', async () => {
      await backend.acquire(keys, 'a', 1_000);
      jest.advanceTimersByTime(900);
      expect(await backend.extend(keys, 'a', 1_000)).toBe(true);
      expect(backend.pttl(keys)).toBe(1_000);
      expect(await backend.extend(keys, 'b', 5_000)).toBe(false);
      expect(backend.pttl(keys)).toBe(1_000);
      jest.advanceTimersByTime(1_001);
      expect(await backend.extend(keys, 'a', 1_000)).toBe(false);
    });

    it('keeps the fence counter alive under a held lock: it outlives the lease it follows', async () => {
      const fence = await backend.acquire(keys, 'a', 500);
      for (let i = 0; i < 10; i++) {
        jest.advanceTimersByTime(400);
        expect(await backend.extend(keys, 'a', 500)).toBe(true);
      }
      expect(await backend.release(keys, 'a')).toBe(true);
      expect(await backend.acquire(keys, 'b', 500)).toBe(fence + 1);
    });

    it('answers renewMany one boolean per lease, renewing only its own (lease rounded up)', async () => {
      const other = lockRedisKeys('lock:', 'other');
      await backend.acquire(keys, 'a', 1_000);
      await backend.acquire(other, 'x', 1_000);
      const leases = [
        { redisKeys: keys, token: 'a', lease: 2_000.2, fence: 1 },
        { redisKeys: other, token: 'a', lease: 2_000, fence: 1 },
      ];
      expect(await backend.renewMany(leases)).toEqual([true, false]);
      expect([backend.pttl(keys), backend.pttl(other)]).toEqual([2_001, 1_000]);
    });
  });

  describe('release, forceRelease and their messages', () => {
    it('deletes its own lock and publishes the releasing token, on a later promise job', async () => {
      await backend.acquire(keys, 'a', 1_000);
      expect(await backend.acquire(keys, 'b', 1_000)).toBeLessThan(0); // refused: marks a's lease
      expect(await backend.release(keys, 'b')).toBe(false);
      const released = backend.release(keys, 'a');
      expect(heard).toEqual([]); // never inside the publishing call
      expect(await released).toBe(true);
      await flush();
      expect(heard).toEqual([`${keys.channel} a`]);
      expect(await backend.release(keys, 'a')).toBe(false);
      await flush();
      expect(heard).toHaveLength(1);
    });

    it('force-releases whoever holds it and publishes "1"; nothing when free', async () => {
      await backend.acquire(keys, 'a', 1_000);
      expect(await backend.forceRelease(keys)).toBe(true);
      expect(await backend.forceRelease(keys)).toBe(false);
      await flush();
      expect(heard).toEqual([`${keys.channel} 1`]);
    });

    it('publishes nothing for a lease no try was refused by', async () => {
      await backend.acquire(keys, 'a', 1_000);
      expect(await backend.release(keys, 'a')).toBe(true);
      await flush();
      expect(heard).toEqual([]);
    });

    it('reaches only subscribers of that channel, and none after unsubscribe or close', async () => {
      const other = backend.createPubSub();
      const otherHeard: string[] = [];
      other.onMessage((_, message) => otherHeard.push(message));
      await other.subscribe('elsewhere');
      await backend.acquire(keys, 'a', 1_000);
      await backend.acquire(keys, 'x', 1_000); // refused: marks the lease, so its release publishes
      await backend.release(keys, 'a');
      await flush();
      expect(otherHeard).toEqual([]);
      await other.subscribe(keys.channel);
      expect(backend.subscriberCount(keys.channel)).toBe(2);
      await other.unsubscribe(keys.channel);
      other.close();
      expect(backend.subscriberCount(keys.channel)).toBe(1);
      await backend.acquire(keys, 'b', 1_000);
      await backend.acquire(keys, 'x', 1_000);
      await backend.release(keys, 'b');
      await flush();
      expect(otherHeard).toEqual([]);
      expect(heard).toEqual([`${keys.channel} a`, `${keys.channel} b`]);
    });
  });

  describe('fair mode', () => {
    const fair = (token: string, queue = true, ttl = 1_000, waiterTtl = 300) =>
      backend.fairAcquire(keys, token, ttl, queue, waiterTtl);

    it('queues the busy, and hands the lock to the head on release, with a lease its entry bounds', async () => {
      const { granted } = (await fair('a')) as { granted: number };
      expect(granted).toBeGreaterThan(0);
      expect(await fair('b')).toEqual({ retryAfterMs: 1_000, fence: granted });
      jest.advanceTimersByTime(100);
      expect(await fair('c')).toEqual({ retryAfterMs: 900, fence: granted });
      expect(backend.queued(keys)).toEqual(['b', 'c']);

      expect(await backend.fairRelease(keys, 'a')).toBe(true);
      await flush();
      expect(heard).toEqual([`${keys.channel} grant:b:${granted + 1}`]);
      // b's entry, written at 0, lapses at 300: the hand-off lasts the 200 ms left of it.
      expect(await fair('b')).toEqual({ ours: granted + 1, pttl: 200 });
      expect(backend.queued(keys)).toEqual(['c']);
    });

    it('keeps a free lock for the head of the queue: a newcomer waits until the head’s entry lapses', async () => {
      await fair('a', true, 100);
      await fair('b'); // queued at 0, entry until 300
      jest.advanceTimersByTime(150); // a's lease ran out without a release
      expect(await fair('newcomer', false)).toEqual({
        retryAfterMs: 150,
        fence: expect.any(Number),
      });
      expect(backend.queued(keys)).toEqual(['b']);
      expect(await fair('b')).toEqual({ granted: expect.any(Number) });
      expect(backend.queued(keys)).toEqual([]);
    });

    it('passes over a waiter whose entry lapsed when it hands the lock on', async () => {
      await fair('a', true, 1_000);
      await fair('b'); // entry until 300
      jest.advanceTimersByTime(200);
      await fair('c'); // entry until 500
      jest.advanceTimersByTime(150);
      expect(await backend.fairRelease(keys, 'a')).toBe(true);
      expect(backend.holder(keys)).toBe('c');
      await flush();
      expect(heard).toEqual([expect.stringMatching(/ grant:c:\d+$/)]);
    });

    it('frees the lock and publishes the token when nobody waits; a non-holder only leaves the queue', async () => {
      await fair('a');
      await fair('b');
      expect(await backend.fairRelease(keys, 'b')).toBe(false);
      expect(backend.queued(keys)).toEqual([]);
      expect(await backend.fairRelease(keys, 'a')).toBe(true);
      expect(await backend.isLocked(keys)).toBe(false);
      await flush();
      expect(heard).toEqual([`${keys.channel} a`]);
    });

    it('drops the whole queue when its last entry would have lapsed', async () => {
      await fair('a', true, 10_000);
      await fair('b');
      jest.advanceTimersByTime(301);
      expect(backend.queued(keys)).toEqual([]);
    });
  });

  it('takes its time from an injected clock when given one', async () => {
    let now = 5_000;
    const manual = new MemoryLockBackend({ now: () => now });
    await manual.acquire(keys, 'a', 100);
    now += 100;
    expect(await manual.isLocked(keys)).toBe(true);
    now += 1;
    expect(await manual.isLocked(keys)).toBe(false);
  });

  it('refuses commands once closed', async () => {
    await backend.close();
    await expect(backend.acquire(keys, 'a', 1_000)).rejects.toThrow(/closed/);
  });
});
