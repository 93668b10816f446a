import { Logger } from '@nestjs/common';
import { MemoryLockBackend } from '../backends/memory.backend';
import type { RedisLockModuleOptions } from '../options/redis-lock-options';
import { resolveOptions } from '../options/resolve-options';
import { useClockSource } from '../util/clock';
import type { AcquireOutcome, AcquireRequest } from './acquire-request';
import type { HeldLock } from './held-lock';
import { LockEngine } from './lock-engine';

/**
 * The acquire loop of both acquirers, through LockEngine on the in-memory backend, with Jest's
 * fake timers driving every clock: the backend's leases, the engine's deadlines and its sleeps.
 * Each app instance is its own engine on the one backend, so a release reaches another instance's
 * waiter only as a release message.
 */
describe('the acquire loop (in-memory backend, fake timers)', () => {
  let backend: MemoryLockBackend;
  let engines: LockEngine[];

  beforeEach(() => {
    jest.useFakeTimers();
    useClockSource({ monotonic: () => performance.now(), wall: () => Date.now() });
    jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    backend = new MemoryLockBackend();
    engines = [];
  });

  afterEach(async () => {
    await Promise.all(engines.map((engine) => engine.drain()));
    await Promise.all(engines.map((engine) => engine.close()));
    jest.useRealTimers();
    useClockSource();
    jest.restoreAllMocks();
  });

  /** One app instance's engine on the shared backend; no jitter, so sleeps are exact. */
  function instance(options: RedisLockModuleOptions = {}): LockEngine {
    const resolved = resolveOptions({
      startupCheck: 'off',
      retryJitter: 0,
      shutdownGrace: 0,
      ...options,
    });
    const engine = new LockEngine(resolved, { backend });
    engines.push(engine);
    return engine;
  }

  function request(overrides: Partial<AcquireRequest> = {}): AcquireRequest {
    return { key: 'k', ttl: 10_000, wait: 0, maxHold: Infinity, renew: false, ...overrides };
  }

  async function held(engine: LockEngine, overrides?: Partial<AcquireRequest>): Promise<HeldLock> {
    const outcome = await engine.acquire(request(overrides));
    if (!('lock' in outcome)) throw new Error(`busy for ${outcome.retryAfterMs} ms`);
    return outcome.lock;
  }

  /** Tracks a call's outcome as time is advanced. */
  function track(call: Promise<AcquireOutcome>) {
    const state: { outcome?: AcquireOutcome; error?: unknown } = {};
    call.then(
      (outcome) => (state.outcome = outcome),
      (error: unknown) => (state.error = error),
    );
    return state;
  }

  const keys = () => engines[0]!.keysOf('k');

  describe('plain mode', () => {
    it('wakes a waiter on the release message, long before the holder lease ends', async () => {
      const holder = await held(instance());
      const other = instance();
      const tries = jest.spyOn(backend, 'acquire');
      const waiting = track(other.acquire(request({ wait: 5_000 })));
      await jest.advanceTimersByTimeAsync(100);
      expect(waiting.outcome).toBeUndefined();

      await holder.release();
      await jest.advanceTimersByTimeAsync(0);
      expect(waiting.outcome).toHaveProperty('lock.fence', holder.fence + 1);
      expect(backend.holder(keys())).toBe((waiting.outcome as { lock: HeldLock }).lock.token);
      // A try, the try after subscribing, and the one the message woke: no polling.
      expect(tries).toHaveBeenCalledTimes(3);
    });

    it('without a message (the lease expired), tries again when the holder lease ends', async () => {
      await held(instance(), { ttl: 1_000 });
      const other = instance();
      const tries = jest.spyOn(backend, 'acquire');
      const waiting = track(other.acquire(request({ wait: 5_000 })));
      await jest.advanceTimersByTimeAsync(999);
      expect(waiting.outcome).toBeUndefined();
      expect(tries).toHaveBeenCalledTimes(2);

      // Redis keeps the key through its last millisecond: the try at 1 000 ms still finds it busy
      // (PTTL 0), and the one after gets it.
      await jest.advanceTimersByTimeAsync(2);
      expect(waiting.outcome).toHaveProperty('lock');
      expect(tries.mock.calls.length).toBeLessThanOrEqual(4);
    });

    it('gives up at the wait deadline with the holder remaining lease', async () => {
      await held(instance(), { ttl: 10_000 });
      const waiting = track(instance().acquire(request({ wait: 2_000 })));
      await jest.advanceTimersByTimeAsync(1_999);
      expect(waiting.outcome).toBeUndefined();
      await jest.advanceTimersByTimeAsync(1);
      expect(waiting.outcome).toEqual({ retryAfterMs: 8_000, waited: 2_000 });
    });

    it('ends the wait when its signal aborts, with the signal reason', async () => {
      await held(instance());
      const controller = new AbortController();
      const waiting = track(
        instance().acquire(request({ wait: 5_000, signal: controller.signal })),
      );
      await jest.advanceTimersByTimeAsync(300);
      const reason = new Error('request cancelled');
      controller.abort(reason);
      await jest.advanceTimersByTimeAsync(0);
      expect(waiting.error).toBe(reason);
      expect(waiting.outcome).toBeUndefined();
    });
  });

  describe('fair mode', () => {
    it('hands the lock to the waiters in arrival order, each with the next fence', async () => {
      const holder = await held(instance({ fair: true }));
      const calls = ['a', 'b', 'c'].map((name) => {
        const call = track(instance({ fair: true }).acquire(request({ wait: 5_000 })));
        return { name, call };
      });
      // Queued one after the other (each call queues on its second try, after subscribing).
      for (let i = 0; i < 3; i++) await jest.advanceTimersByTimeAsync(10);
      expect(backend.queued(keys())).toHaveLength(3);

      const order: [string, number][] = [];
      let current = holder;
      for (let turn = 0; turn < 3; turn++) {
        await current.release();
        await jest.advanceTimersByTimeAsync(0);
        const granted = calls.filter(({ call }) => call.outcome && 'lock' in call.outcome);
        expect(granted).toHaveLength(turn + 1);
        const { name, call } = granted[turn]!;
        current = (call.outcome as { lock: HeldLock }).lock;
        order.push([name, current.fence]);
        expect(backend.queued(keys())).toHaveLength(2 - turn);
      }
      expect(order).toEqual([
        ['a', holder.fence + 1],
        ['b', holder.fence + 2],
        ['c', holder.fence + 3],
      ]);
      await current.release();
    });

    it('leaves the queue when it gives up, so the next in line is served', async () => {
      const holder = await held(instance({ fair: true }));
      const impatient = track(instance({ fair: true }).acquire(request({ wait: 500 })));
      await jest.advanceTimersByTimeAsync(10);
      const patient = track(instance({ fair: true }).acquire(request({ wait: 5_000 })));
      await jest.advanceTimersByTimeAsync(10);
      expect(backend.queued(keys())).toHaveLength(2);

      await jest.advanceTimersByTimeAsync(500);
      expect(impatient.outcome).toMatchObject({ waited: 500 });
      expect(backend.queued(keys())).toHaveLength(1);

      await holder.release();
      await jest.advanceTimersByTimeAsync(0);
      expect(patient.outcome).toHaveProperty('lock.fence', holder.fence + 1);
    });

    it('ends a queued wait when its signal aborts, and leaves the queue', async () => {
      await held(instance({ fair: true }));
      const controller = new AbortController();
      const waiting = track(
        instance({ fair: true }).acquire(request({ wait: 5_000, signal: controller.signal })),
      );
      await jest.advanceTimersByTimeAsync(10);
      expect(backend.queued(keys())).toHaveLength(1);
      controller.abort(new Error('gone'));
      await jest.advanceTimersByTimeAsync(0);
      expect(waiting.error).toEqual(new Error('gone'));
      expect(backend.queued(keys())).toHaveLength(0);
    });
  });
});
