/**
 * The typed lifecycle events of `LockService.on()`: each one's payload, on the real Redis;
 * listeners that throw or reject never break a lock call; a renewal that fails (a private
 * redis-server paused with SIGSTOP) is reported before the loss; and the library works in a
 * process where `@opentelemetry/api` cannot be resolved.
 */
import { LockLostError, LockNotAcquiredError, type LockHandle } from 'nestjs-redis-lock';
import type {
  LockAcquiredEvent,
  LockBusyEvent,
  LockReleasedEvent,
  LockRenewalFailedEvent,
} from 'nestjs-redis-lock/inspect';
import { CONNECT_BUDGET, lockServices, onSharedRedis } from './support/lock-services';
import { killAllWorkers, spawnWorker } from './support/processes';
import { startRedis, stopAllRedis } from './support/redis-server';
import { SHARED_REDIS_URL } from './support/shared-redis';
import { now, sleep } from './support/time';

const { prefix, redis, services, keyOf } = onSharedRedis('events');

afterAll(async () => {
  await killAllWorkers();
  await stopAllRedis();
});

describe('lifecycle events', () => {
  it('emits acquired, busy, released and lost with their payloads', async () => {
    const locks = services.create({ ttl: 600 });
    const acquired: LockAcquiredEvent[] = [];
    const busy: LockBusyEvent[] = [];
    const released: LockReleasedEvent[] = [];
    const lost: [LockLostError, LockHandle][] = [];
    locks
      .on('acquired', (event) => void acquired.push(event))
      .on('busy', (event) => void busy.push(event))
      .on('released', (event) => void released.push(event))
      .on('lost', (error, lock) => void lost.push([error, lock]));

    const started = now();
    const first = await locks.acquire('order:1');
    const firstTook = now() - started;
    await expect(locks.acquire('order:1', { wait: 150 })).rejects.toThrow(LockNotAcquiredError);
    await sleep(50);
    expect(await first.release()).toBe(true);

    const second = await locks.acquire('order:1');
    await redis.del(keyOf('order:1')); // the next renewal finds it gone
    await new Promise((resolve) => locks.on('lost', resolve));

    expect(acquired).toEqual([
      { key: 'order:1', fence: first.fence, waitedMs: expect.any(Number), mode: 'default' },
      { key: 'order:1', fence: second.fence, waitedMs: expect.any(Number), mode: 'default' },
    ]);
    expect(acquired[0]!.waitedMs).toBeGreaterThan(0);
    expect(acquired[0]!.waitedMs).toBeLessThanOrEqual(firstTook);
    expect(busy).toEqual([
      {
        key: 'order:1',
        waitedMs: expect.any(Number),
        retryAfterMs: expect.any(Number),
        mode: 'default',
      },
    ]);
    expect(busy[0]!.waitedMs).toBeGreaterThanOrEqual(145);
    expect(busy[0]!.retryAfterMs).toBeGreaterThan(0);
    expect(released).toEqual([
      { key: 'order:1', fence: first.fence, heldMs: expect.any(Number), mode: 'default' },
    ]);
    expect(released[0]!.heldMs).toBeGreaterThanOrEqual(200);
    expect(lost).toHaveLength(1);
    expect(lost[0]![0]).toBeInstanceOf(LockLostError);
    expect(lost[0]![0].reason).toBe('not-owner');
    expect(lost[0]![1]).toBe(second);
  });

  it('says which mode took the lock', async () => {
    const fair = services.create({ fair: true });
    const modes: string[] = [];
    fair.on('acquired', ({ mode }) => void modes.push(mode));
    await fair.withLock('fair:1', () => undefined);
    expect(modes).toEqual(['fair']);
  });

  it('stops calling a listener that off() removed', async () => {
    const locks = services.create();
    const listener = jest.fn();
    locks.on('released', listener);
    await locks.withLock('off:1', () => undefined);
    locks.off('released', listener);
    await locks.withLock('off:1', () => undefined);
    expect(listener).toHaveBeenCalledTimes(1);
  });

  it('never lets a listener that throws or rejects break a lock call', async () => {
    const locks = services.create();
    const throwing = (): never => {
      throw new Error('listener bug');
    };
    const rejecting = (): Promise<never> => Promise.reject(new Error('async listener bug'));
    const after = jest.fn();
    for (const name of ['acquired', 'busy', 'released'] as const) {
      locks.on(name, throwing).on(name, rejecting).on(name, after);
    }
    const lock = await locks.acquire('throws:1');
    expect(await locks.tryAcquire('throws:1')).toBeNull();
    expect(await lock.release()).toBe(true);
    expect(await locks.withLock('throws:1', () => 'done')).toBe('done');
    await sleep(10); // the rejections are logged, not left unhandled (fail-on-unhandled checks)
    expect(after).toHaveBeenCalledTimes(5);
  });

  it('reports a failed renewal with its keys before the loss', async () => {
    const server = await startRedis();
    const own = lockServices({ redis: server.url, prefix, ttl: 900, commandTimeout: 150 });
    try {
      const locks = own.create();
      const failures: LockRenewalFailedEvent[] = [];
      const order: string[] = [];
      locks.on('renewal-failed', (event) => {
        failures.push(event);
        order.push('renewal-failed');
      });
      const lost = new Promise((resolve) =>
        locks.on('lost', (error) => {
          order.push('lost');
          resolve(error.reason);
        }),
      );
      await locks.acquire('renew:1', CONNECT_BUDGET); // commandTimeout is 150 ms
      server.pause();
      try {
        expect(await lost).toBe('deadline');
      } finally {
        server.resume();
      }
      expect(failures.length).toBeGreaterThanOrEqual(1);
      expect(failures[0]!.keys).toEqual(['renew:1']);
      expect(failures[0]!.error).toBeInstanceOf(Error);
      expect(order[0]).toBe('renewal-failed');
      expect(order.at(-1)).toBe('lost');
    } finally {
      await own.closeAll();
    }
  });
});

describe('without @opentelemetry/api installed', () => {
  it('loads and locks, events included', async () => {
    // Each worker on its own prefix: they run at once, and both lock 'job'.
    const env = (name: string) => ({ REDIS_URL: SHARED_REDIS_URL, PREFIX: `${prefix}${name}:` });
    const hidden = spawnWorker('test/fixtures/no-otel-worker.ts', {
      ...env('hidden'),
      HIDE_OTEL_API: '1',
    });
    const control = spawnWorker('test/fixtures/no-otel-worker.ts', env('control'));
    const seen = {
      busy: null,
      released: true,
      ran: 'ran',
      events: ['acquired', 'busy', 'released', 'acquired', 'released'],
    };
    expect(JSON.parse(await hidden.succeeded())).toEqual({ otel: false, ...seen });
    // The same worker with the API resolvable: the hiding is what differs.
    expect(JSON.parse(await control.succeeded())).toEqual({ otel: true, ...seen });
  });
});
