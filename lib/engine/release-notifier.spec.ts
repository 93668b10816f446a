import type { Logger } from '@nestjs/common';
import type { ReleasePubSub } from '../redis/release-pubsub';
import { MemoryLockBackend } from '../backends/memory.backend';
import { lockRedisKeys } from '../keys/lock-keys';
import { ReleaseNotifier } from './release-notifier';
import type { Waiter } from './waiter';

const silent = { warn: () => undefined } as unknown as Logger;
const keys = lockRedisKeys('lock:', 'k');
const otherKeys = lockRedisKeys('lock:', 'other');

/** Lets promise jobs run (release messages are delivered on one). */
const flush = async (): Promise<void> => {
  for (let i = 0; i < 10; i++) await Promise.resolve();
};

/** Sleeps `waiter` for long; `woken()` tells whether it woke (by a message, not its timer). */
function sleeping(waiter: Waiter): { woken: () => boolean } {
  let woken = false;
  void waiter.sleep(60_000).then(() => (woken = true));
  return { woken: () => woken };
}

describe('ReleaseNotifier (in-memory backend, fake timers)', () => {
  let backend: MemoryLockBackend;
  let subscribers: number;
  let notifier: ReleaseNotifier;

  beforeEach(() => {
    jest.useFakeTimers();
    backend = new MemoryLockBackend();
    subscribers = 0;
    notifier = new ReleaseNotifier(() => {
      subscribers++;
      return backend.createPubSub();
    }, silent);
  });

  afterEach(async () => {
    await notifier.close();
    jest.useRealTimers();
  });

  /** Another process holds `of` and releases it: its message carries a token we never sent. */
  async function releasedElsewhere(of = keys): Promise<void> {
    await backend.acquire(of, 'elsewhere', 1_000);
    await backend.acquire(of, 'refused', 1_000); // marks it as waited for: its release publishes
    await backend.release(of, 'elsewhere');
    await flush();
  }

  it('subscribes a channel once, over one connection, however many wait on it', async () => {
    await notifier.register(keys.channel, 1_000);
    await notifier.register(keys.channel, 1_000);
    await notifier.register(otherKeys.channel, 1_000);
    expect(subscribers).toBe(1);
    expect(notifier.channelCount).toBe(2);
    expect(backend.subscriberCount(keys.channel)).toBe(1);
  });

  it('wakes one waiter per release message: the longest-waiting sleeping one', async () => {
    const first = sleeping(await notifier.register(keys.channel, 1_000));
    const second = sleeping(await notifier.register(keys.channel, 1_000));
    const elsewhere = sleeping(await notifier.register(otherKeys.channel, 1_000));
    await releasedElsewhere();
    expect([first.woken(), second.woken(), elsewhere.woken()]).toEqual([true, false, false]);
    await releasedElsewhere();
    expect(second.woken()).toBe(true);
    expect(elsewhere.woken()).toBe(false);
  });

  it('wakes on a forced release ("1") too', async () => {
    const waiter = sleeping(await notifier.register(keys.channel, 1_000));
    await backend.acquire(keys, 'holder', 1_000);
    await backend.forceRelease(keys);
    await flush();
    expect(waiter.woken()).toBe(true);
  });

  it('keeps a message that came while the waiter was busy trying: its next sleep ends at once', async () => {
    const waiter = await notifier.register(keys.channel, 1_000);
    await releasedElsewhere();
    const woken = sleeping(waiter);
    await flush();
    expect(woken.woken()).toBe(true);
  });

  it('falls back to its timer when no message comes', async () => {
    const waiter = await notifier.register(keys.channel, 1_000);
    let woken = false;
    void waiter.sleep(500).then(() => (woken = true));
    await jest.advanceTimersByTimeAsync(499);
    expect(woken).toBe(false);
    await jest.advanceTimersByTimeAsync(1);
    expect(woken).toBe(true);
  });

  it('ends a sleep when its signal aborts, with the signal’s reason', async () => {
    const waiter = await notifier.register(keys.channel, 1_000);
    const abort = new AbortController();
    const slept = waiter.sleep(60_000, abort.signal);
    abort.abort(new Error('cancelled'));
    await expect(slept).rejects.toThrow('cancelled');
    expect(waiter.isSleeping).toBe(false);
  });

  it('unsubscribes a channel when its last waiter leaves, and no message reaches it then', async () => {
    const first = await notifier.register(keys.channel, 1_000);
    const second = await notifier.register(keys.channel, 1_000);
    notifier.unregister(first);
    expect(backend.subscriberCount(keys.channel)).toBe(1);
    notifier.unregister(second);
    await flush();
    expect(notifier.channelCount).toBe(0);
    expect(backend.subscriberCount(keys.channel)).toBe(0);
    const woken = sleeping(second);
    await releasedElsewhere();
    expect(woken.woken()).toBe(false);
  });

  it('wakes only the waiter a fair-mode hand-off names, with its fence', async () => {
    const a = await notifier.register(keys.channel, 1_000, undefined, 'waiter-a');
    const b = await notifier.register(keys.channel, 1_000, undefined, 'waiter-b');
    const [aWoken, bWoken] = [sleeping(a), sleeping(b)];
    await backend.fairAcquire(keys, 'holder', 1_000, true, 500);
    await backend.fairAcquire(keys, 'waiter-b', 1_000, true, 500);
    await backend.fairRelease(keys, 'holder');
    await flush();
    expect([aWoken.woken(), bWoken.woken()]).toEqual([false, true]);
    const fence = b.takeGrant();
    expect(fence).toBeGreaterThan(0);
    expect(await backend.fairAcquire(keys, 'waiter-b', 1_000, true, 500)).toMatchObject({
      ours: fence,
    });
    expect(b.takeGrant()).toBeUndefined();
    expect(a.takeGrant()).toBeUndefined();
  });

  it.each([
    ['the reply comes first', true],
    ['the message comes first', false],
  ])(
    'hands an own release to one local waiter only, whichever of reply and message comes first (%s)',
    async (_, replyFirst) => {
      const first = sleeping(await notifier.register(keys.channel, 1_000));
      const second = sleeping(await notifier.register(keys.channel, 1_000));
      await backend.acquire(keys, 'mine', 1_000);
      notifier.releaseSent('mine');
      const released = backend.release(keys, 'mine'); // its message is on its way already
      if (replyFirst) notifier.releaseAnswered(keys.channel, 'mine', true);
      await flush();
      expect(await released).toBe(true);
      if (!replyFirst) notifier.releaseAnswered(keys.channel, 'mine', true);
      await flush();
      expect([first.woken(), second.woken()]).toEqual([true, false]);
    },
  );

  it('wakes nobody for an own release that deleted nothing', async () => {
    const waiter = sleeping(await notifier.register(keys.channel, 1_000));
    notifier.releaseSent('mine');
    notifier.releaseAnswered(keys.channel, 'mine', await backend.release(keys, 'mine'));
    await flush();
    expect(waiter.woken()).toBe(false);
  });

  it('passes a wake-up on to the next waiter, and wakes all on wakeAll()', async () => {
    const first = sleeping(await notifier.register(keys.channel, 1_000));
    const second = sleeping(await notifier.register(keys.channel, 1_000));
    const third = sleeping(await notifier.register(otherKeys.channel, 1_000));
    notifier.passOn(keys.channel);
    await flush();
    expect([first.woken(), second.woken(), third.woken()]).toEqual([true, false, false]);
    notifier.wakeAll();
    await flush();
    expect([second.woken(), third.woken()]).toEqual([true, true]);
  });

  describe('subscribing', () => {
    /** A pub/sub whose subscriptions are never confirmed (Redis out of reach). */
    const stuck = (): ReleasePubSub => ({
      subscribe: () => new Promise(() => undefined),
      unsubscribe: () => Promise.resolve(),
      onMessage: () => undefined,
      onError: () => undefined,
      close: () => undefined,
    });

    it('stops waiting for the confirmation after timeoutMs, and keeps the waiter', async () => {
      notifier = new ReleaseNotifier(stuck, silent);
      let registered: Waiter | undefined;
      void notifier.register(keys.channel, 300).then((waiter) => (registered = waiter));
      await jest.advanceTimersByTimeAsync(299);
      expect(registered).toBeUndefined();
      await jest.advanceTimersByTimeAsync(1);
      expect(registered).toBeDefined();
      expect(notifier.channelCount).toBe(1);
    });

    it('leaves at once when aborted while subscribing, letting the channel go', async () => {
      notifier = new ReleaseNotifier(stuck, silent);
      const abort = new AbortController();
      const registered = notifier.register(keys.channel, 10_000, abort.signal);
      abort.abort(new Error('cancelled'));
      await expect(registered).rejects.toThrow('cancelled');
      expect(notifier.channelCount).toBe(0);
    });

    it('logs a failed subscription and keeps the waiter, which relies on its timer', async () => {
      const warn = jest.fn();
      notifier = new ReleaseNotifier(
        () => ({ ...stuck(), subscribe: () => Promise.reject(new Error('NOPERM')) }),
        { warn } as unknown as Logger,
      );
      await notifier.register(keys.channel, 1_000);
      expect(warn).toHaveBeenCalledWith(expect.stringContaining('NOPERM'));
      expect(notifier.channelCount).toBe(1);
    });

    it('opens no connection once closed: a waiter relies on its timer', async () => {
      await notifier.close();
      await notifier.register(keys.channel, 1_000);
      expect(subscribers).toBe(0);
    });
  });

  it('wakes every waiter when its subscriber connection came back: a release may have been missed', async () => {
    let reconnected: () => void = () => undefined;
    const withReconnect = new ReleaseNotifier((): ReleasePubSub => {
      const pubsub = backend.createPubSub();
      return Object.assign(pubsub, {
        onReconnected: (listener: () => void) => void (reconnected = listener),
      });
    }, silent);
    try {
      const first = sleeping(await withReconnect.register(keys.channel, 1_000));
      const second = sleeping(await withReconnect.register(otherKeys.channel, 1_000));
      await flush();
      expect([first.woken(), second.woken()]).toEqual([false, false]);
      reconnected();
      await flush();
      expect([first.woken(), second.woken()]).toEqual([true, true]);
    } finally {
      await withReconnect.close();
    }
  });
});
