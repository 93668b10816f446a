/**
 * Re-entrancy through the async call chain: holds on one key in one chain are counted, and the
 * key is released only when the last of them settles; a frame captured by a callback (a timer, a
 * poller, a socket) stops counting as holding once its own hold settled; `outsideLocks()` starts
 * such resources without the chain's locks.
 */
import { Controller, Injectable, Logger, Param, Post, type INestApplication } from '@nestjs/common';
import { AsyncResource } from 'node:async_hooks';
import { EventEmitter } from 'node:events';
import { performance } from 'node:perf_hooks';
import request from 'supertest';
import {
  currentLock,
  Locked,
  LockLostError,
  LockNotAcquiredError,
  type LockService,
  outsideLocks,
  RedisLockConfigError,
  type LockHandle,
} from 'nestjs-redis-lock';
import { useClockSource } from '../lib/util/clock';
import { createDecoratorApp } from './decorator/decorator-app';
import { onSharedRedis } from './support/lock-services';
import { Gate, sleep, waitFor } from './support/time';

const { services, redis, keyOf } = onSharedRedis('reentrancy');

/** Whether `locks` gets `key` right now (released again at once if so). */
async function acquiredBy(locks: LockService, key: string): Promise<boolean> {
  const lock = await locks.tryAcquire(key);
  await lock?.release();
  return lock !== null;
}

describe('counted re-entrant holds', () => {
  it('keeps the key until the last hold settles: an inner withLock the outer did not await', async () => {
    const locks = services.create();
    const other = services.create();
    const gate = new Gate();
    let inner: Promise<boolean> | undefined;
    let innerLock: LockHandle | undefined;

    const outerFence = await locks.withLock('fire-and-forget', (outer) => {
      // Started in the outer's chain and not awaited: it outlives the outer.
      inner = locks.withLock('fire-and-forget', async (lock) => {
        innerLock = lock;
        await gate.opened;
        return lock.signal.aborted;
      });
      return outer.fence;
    });

    // The outer returned; the inner still runs under the same lock, so nobody else gets in.
    expect(innerLock?.fence).toBe(outerFence);
    expect(await acquiredBy(other, 'fire-and-forget')).toBe(false); // refused: marks the lease
    expect(await redis.get(keyOf('fire-and-forget'))).toBe(`*${innerLock!.token}`);
    expect(innerLock!.isHeld).toBe(true);

    gate.release();
    expect(await inner).toBe(false); // never aborted: it was protected to its end
    expect(await redis.exists(keyOf('fire-and-forget'))).toBe(0);
    const next = await other.tryAcquire('fire-and-forget');
    expect(next?.fence).toBeGreaterThan(outerFence);
    await next!.release();
  });

  it('renews the lease while only the inner hold is left', async () => {
    const ttl = 600;
    const locks = services.create({ ttl });
    const other = services.create();
    const gate = new Gate();
    let inner: Promise<void> | undefined;
    await locks.withLock('renewed', () => {
      inner = locks.withLock('renewed', () => gate.opened);
    });
    // Well past the lease: only renewal can keep the key.
    await sleep(3 * ttl);
    expect(await acquiredBy(other, 'renewed')).toBe(false);
    expect(await redis.pttl(keyOf('renewed'))).toBeGreaterThan(0);
    gate.release();
    await inner;
    expect(await redis.exists(keyOf('renewed'))).toBe(0);
  });

  it("keeps the key for the inner hold when the outer throws, and passes the outer's error through", async () => {
    const locks = services.create();
    const other = services.create();
    const gate = new Gate();
    let inner: Promise<string> | undefined;
    const outer = locks.withLock('outer-throws', () => {
      inner = locks.withLock('outer-throws', async () => {
        await gate.opened;
        return 'inner done';
      });
      throw new Error('outer failed');
    });
    await expect(outer).rejects.toThrow('outer failed');
    expect(await acquiredBy(other, 'outer-throws')).toBe(false);
    gate.release();
    expect(await inner).toBe('inner done');
    expect(await redis.exists(keyOf('outer-throws'))).toBe(0);
  });

  it('lets the inner hold see a loss after the outer returned (signal aborted, LockLostError)', async () => {
    const locks = services.create({ ttl: 600 });
    const gate = new Gate();
    let inner: Promise<boolean> | undefined;
    await locks.withLock('lost-inner', () => {
      inner = locks.withLock('lost-inner', async (lock) => {
        await gate.opened;
        return lock.signal.aborted;
      });
    });
    inner!.catch(() => undefined); // asserted below
    await redis.del(keyOf('lost-inner')); // an operator deletes the key: the next renewal finds out
    let lost = false;
    locks.on('lost', () => (lost = true));
    await waitFor(() => lost, 5_000);
    gate.release();
    await expect(inner).rejects.toBeInstanceOf(LockLostError);
  });
});

describe('release() and per-call bounds on a re-entrant hold', () => {
  it("an inner hold's release() ends only that hold: the key stays held, the outer's signal live", async () => {
    const locks = services.create();
    const other = services.create();
    const innerReleased = new Gate();
    const checked = new Gate();
    let releasedAnswer: boolean | undefined;
    let innerAfter: { aborted: boolean; isHeld: boolean } | undefined;
    let outerView: { aborted: boolean; isHeld: boolean } | undefined;
    let innerError: unknown;
    const outer = locks.withLock('inner-release', async (outerLock) => {
      await locks
        .withLock('inner-release', async (inner) => {
          releasedAnswer = await inner.release(); // "done with the lock" in a nested step
          innerAfter = { aborted: inner.signal.aborted, isHeld: inner.isHeld };
        })
        .catch((error: unknown) => (innerError = error));
      innerReleased.release();
      await checked.opened;
      outerView = { aborted: outerLock.signal.aborted, isHeld: outerLock.isHeld };
      return 'outer done';
    });
    await innerReleased.opened;
    // The outer hold still runs: nobody else gets the key.
    expect(await acquiredBy(other, 'inner-release')).toBe(false);
    checked.release();
    expect(await outer).toBe('outer done');
    expect(innerError).toBeUndefined();
    expect(releasedAnswer).toBe(true);
    // The released hold is over for its own handle; the outer one was never disturbed.
    expect(innerAfter).toEqual({ aborted: true, isHeld: false });
    expect(outerView).toEqual({ aborted: false, isHeld: true });
    expect(await redis.exists(keyOf('inner-release'))).toBe(0);
  });

  it('a withLock whose fn released its lock on purpose resolves with its result, and reports no loss', async () => {
    const locks = services.create();
    const other = services.create();
    const lost: string[] = [];
    locks.on('lost', (error) => lost.push(error.reason));
    const seen = await locks.withLock('released-early', async (lock) => {
      const released = await lock.release();
      // The only hold: the key is free for others right away.
      const otherGot = await acquiredBy(other, 'released-early');
      return { released, otherGot, aborted: lock.signal.aborted, isHeld: lock.isHeld };
    });
    expect(seen).toEqual({ released: true, otherGot: true, aborted: true, isHeld: false });
    expect(lost).toEqual([]);
  });

  it("a re-entrant call's own maxHold ends its hold at that bound; the outer keeps the key", async () => {
    const locks = services.create({ ttl: 300 });
    const other = services.create();
    const gate = new Gate();
    let innerReason: unknown;
    let keyHeldAfterInnerBound: boolean | undefined;
    const outer = locks.withLock('inner-max-hold', async () => {
      const inner = locks.withLock(
        'inner-max-hold',
        async (lock) => {
          await Promise.race([
            new Promise((resolve) => lock.signal.addEventListener('abort', resolve)),
            sleep(3_000),
          ]);
          innerReason = lock.signal.reason;
          keyHeldAfterInnerBound = !(await acquiredBy(other, 'inner-max-hold'));
          await gate.opened;
        },
        { maxHold: 200 },
      );
      await expect(inner).rejects.toMatchObject({ name: 'LockLostError', reason: 'max-hold' });
      return 'outer done';
    });
    await waitFor(() => keyHeldAfterInnerBound !== undefined, 5_000);
    gate.release();
    expect(await outer).toBe('outer done');
    expect(innerReason).toBeInstanceOf(LockLostError);
    expect((innerReason as LockLostError).reason).toBe('max-hold');
    expect(keyHeldAfterInnerBound).toBe(true); // the outer hold, unbounded, still holds it
    expect(await redis.exists(keyOf('inner-max-hold'))).toBe(0);
  });

  it("releases the key at a re-entrant call's maxHold when its hold is the last one", async () => {
    const locks = services.create({ ttl: 300 });
    const other = services.create();
    const gate = new Gate();
    let inner: Promise<void> | undefined;
    let innerLock: LockHandle | undefined;
    await locks.withLock('last-inner-max-hold', () => {
      // Not awaited: it outlives the outer, and bounds itself.
      inner = locks.withLock(
        'last-inner-max-hold',
        async (lock) => {
          innerLock = lock;
          await gate.opened;
        },
        { maxHold: 200 },
      );
    });
    inner!.catch(() => undefined); // asserted below
    await waitFor(async () => (await redis.exists(keyOf('last-inner-max-hold'))) === 0, 3_000);
    // The key is free while the inner work still runs, and that work has been told.
    expect(innerLock!.signal.aborted).toBe(true);
    expect(innerLock!.isHeld).toBe(false);
    expect(await acquiredBy(other, 'last-inner-max-hold')).toBe(true);
    gate.release();
    await expect(inner).rejects.toMatchObject({ name: 'LockLostError', reason: 'max-hold' });
  });

  it("aborts a hold's signal when its call settles, so work it did not await stops", async () => {
    const locks = services.create();
    let captured: LockHandle | undefined;
    await locks.withLock('settled-signal', (lock) => {
      captured = lock;
      expect(lock.signal.aborted).toBe(false);
    });
    expect(captured!.signal.aborted).toBe(true);
    expect(captured!.isHeld).toBe(false);
    expect(await redis.exists(keyOf('settled-signal'))).toBe(0);
  });
});

describe('frames captured by callbacks', () => {
  it('a frame whose own hold settled no longer counts as holding, while an outer hold still runs', async () => {
    const locks = services.create();
    const outerGate = new Gate();
    let callLater: (() => Promise<number>) | undefined;
    let seenInCapturedFrame: LockHandle | undefined | null = null;
    let outerFence = 0;

    const outer = locks.withLock('captured', async (lock) => {
      outerFence = lock.fence;
      await locks.withLock('captured', () => {
        // A callback created inside the (finished) inner hold, as a poller or socket would be.
        callLater = AsyncResource.bind(() => {
          seenInCapturedFrame = currentLock();
          return locks.withLock('captured', (later) => later.fence, { wait: 5_000 });
        });
      });
      await outerGate.opened;
    });

    await waitFor(() => callLater !== undefined);
    let laterDone = false;
    const later = callLater!().finally(() => (laterDone = true));
    // It waits for the outer hold like any other caller, instead of re-entering it.
    await sleep(50);
    expect(laterDone).toBe(false);
    outerGate.release();
    await outer;
    expect(await later).toBeGreaterThan(outerFence);
    // currentLock() there no longer names the finished hold's lock.
    expect(seenInCapturedFrame).toBeUndefined();
  });

  it('a callback in the frame of a finished section acquires normally', async () => {
    const locks = services.create();
    let callLater: (() => Promise<number>) | undefined;
    const sectionFence = await locks.withLock('finished', (lock) => {
      callLater = AsyncResource.bind(() =>
        locks.withLock('finished', (later) => {
          expect(currentLock()).toBe(later);
          return later.fence;
        }),
      );
      return lock.fence;
    });
    expect(await callLater!()).toBeGreaterThan(sectionFence);
  });

  it('outsideLocks() starts a resource whose callbacks do not re-enter the running section', async () => {
    const locks = services.create();
    const gate = new Gate();
    /** A consumer that delivers messages from its own callbacks, like a socket or a queue client. */
    const startConsumer = (onMessage: () => Promise<string>) => {
      const consumer = new EventEmitter();
      const results: Promise<string>[] = [];
      // The listener runs in the frame where the consumer's async resource was created.
      const deliver = AsyncResource.bind(() => results.push(onMessage()));
      consumer.on('message', deliver);
      return { consumer, results };
    };
    const handle = () =>
      locks
        .withLock('account:1', () => 'handled', { wait: 0 })
        .catch((error: unknown) => {
          if (error instanceof LockNotAcquiredError) return 'busy';
          throw error;
        });

    let plain: ReturnType<typeof startConsumer> | undefined;
    let detached: ReturnType<typeof startConsumer> | undefined;
    const section = locks.withLock('account:1', async () => {
      plain = startConsumer(handle);
      detached = outsideLocks(() => startConsumer(handle));
      expect(outsideLocks(() => currentLock())).toBeUndefined();
      await gate.opened;
    });
    await waitFor(() => detached !== undefined);

    // While the section runs: a message to the consumer started in its frame shares the lock
    // (the documented choice); the one started with outsideLocks() is turned away like any caller.
    plain!.consumer.emit('message');
    detached!.consumer.emit('message');
    expect(await plain!.results[0]).toBe('handled');
    expect(await detached!.results[0]).toBe('busy');

    gate.release();
    await section;
    // After the section: each acquires normally (one after the other: `wait` is 0).
    plain!.consumer.emit('message');
    expect(await plain!.results[1]).toBe('handled');
    detached!.consumer.emit('message');
    expect(await detached!.results[1]).toBe('handled');
  });
});

describe('counted holds through @Locked', () => {
  const gate = new Gate();

  @Injectable()
  class ImportJobs {
    running?: Promise<number>;

    @Locked('import:<userId>')
    async run(userId: string): Promise<number> {
      void userId;
      await gate.opened;
      return currentLock()!.fence;
    }

    @Locked('import:<userId>')
    async start(userId: string): Promise<number> {
      this.running = this.run(userId); // fire-and-forget, as a job launcher does
      return currentLock()!.fence;
    }
  }

  @Controller('imports')
  class ImportController {
    constructor(private readonly jobs: ImportJobs) {}

    @Post(':userId')
    @Locked('import:<userId>')
    async launch(@Param('userId') userId: string): Promise<{ started: true }> {
      this.jobs.running = this.jobs.run(userId); // not awaited: the response goes out first
      return { started: true };
    }
  }

  let app: INestApplication;
  let jobs: ImportJobs;
  const { prefix, services: others } = onSharedRedis('reentrancy-decorator');

  beforeAll(async () => {
    app = await createDecoratorApp({
      prefix,
      controllers: [ImportController],
      providers: [ImportJobs],
    });
    jobs = app.get(ImportJobs);
  });
  afterAll(() => app?.close());

  it('a @Locked provider method keeps the key for the @Locked call it started without awaiting', async () => {
    const other = others.create();
    const fence = await jobs.start('user-1');
    expect(await acquiredBy(other, 'import:user-1')).toBe(false);
    gate.release();
    expect(await jobs.running).toBe(fence);
    expect(await acquiredBy(other, 'import:user-1')).toBe(true);
  });

  it('a @Locked route keeps the key for the @Locked job it started, after the response', async () => {
    const other = others.create();
    const response = await request(app.getHttpServer()).post('/imports/user-2');
    expect(response.status).toBe(201);
    expect(await acquiredBy(other, 'import:user-2')).toBe(false);
    gate.release();
    await jobs.running;
    expect(await acquiredBy(other, 'import:user-2')).toBe(true);
  });
});

describe("a re-entrant call's own maxHold", () => {
  it('refuses a maxHold a timer cannot wait, as a fresh acquire does, without running fn', async () => {
    const locks = services.create();
    const ran: number[] = [];
    const refused = await locks.withLock('bad-inner-max-hold', async () => {
      const errors: unknown[] = [];
      for (const maxHold of [3e9, 0]) {
        await locks
          .withLock('bad-inner-max-hold', () => void ran.push(maxHold), { maxHold })
          .catch((error: unknown) => errors.push(error));
      }
      return errors;
    });
    await expect(locks.acquire('bad-fresh-max-hold', { maxHold: 3e9 })).rejects.toBeInstanceOf(
      RedisLockConfigError,
    );
    expect(refused).toHaveLength(2);
    refused.forEach((error) => expect(error).toBeInstanceOf(RedisLockConfigError));
    expect(ran).toEqual([]);
  });

  it("reports a re-entrant hold's own maxHold as a loss (event and log) with onLost 'log'; the outer keeps the key", async () => {
    const locks = services.create({ ttl: 10_000, onLost: 'log' });
    const other = services.create();
    const events: { key: string; reason: string; handle: LockHandle }[] = [];
    locks.on('lost', (error, handle) => void events.push({ ...error, handle }));
    const warned: string[] = [];
    const warn = jest
      .spyOn(Logger.prototype, 'warn')
      .mockImplementation((message: unknown) => void warned.push(String(message)));
    let innerLock: LockHandle | undefined;
    let keyHeldAfterInnerBound: boolean | undefined;
    try {
      const nested = await locks.withLock('silent-inner-max-hold', async () => {
        const result = await locks.withLock(
          'silent-inner-max-hold',
          async (lock) => {
            innerLock = lock;
            await Promise.race([
              new Promise((resolve) => lock.signal.addEventListener('abort', resolve)),
              sleep(3_000),
            ]);
            return 'inner result';
          },
          { maxHold: 100 },
        );
        keyHeldAfterInnerBound = !(await acquiredBy(other, 'silent-inner-max-hold'));
        return result;
      });
      expect(nested).toBe('inner result');
    } finally {
      warn.mockRestore();
    }
    expect((innerLock!.signal.reason as LockLostError).reason).toBe('max-hold');
    expect(events.map(({ key, reason }) => `${key}:${reason}`)).toEqual([
      'silent-inner-max-hold:max-hold',
    ]);
    expect(events[0]!.handle).toBe(innerLock);
    expect(warned.filter((line) => line.includes('"silent-inner-max-hold"'))).toHaveLength(1);
    expect(keyHeldAfterInnerBound).toBe(true);
  });

  it("counts a suspension of the host toward a re-entrant hold's maxHold", async () => {
    let skew = 0;
    useClockSource({ monotonic: () => performance.now(), wall: () => Date.now() + skew });
    try {
      const locks = services.create({ ttl: 10_000 });
      const seen: Record<string, unknown> = {};
      await locks.withLock('suspended-inner-max-hold', async (outer) => {
        const inner = locks.withLock(
          'suspended-inner-max-hold',
          (lock) => {
            skew += 5_000; // the host slept 5 s: past this hold's 2 s maxHold, in Redis' eyes
            seen.innerIsHeld = lock.isHeld;
            seen.innerReason = (lock.signal.reason as LockLostError | undefined)?.reason;
          },
          { maxHold: 2_000 },
        );
        await expect(inner).rejects.toMatchObject({ name: 'LockLostError', reason: 'max-hold' });
        seen.outerIsHeld = outer.isHeld;
      });
      expect(seen).toEqual({ innerIsHeld: false, innerReason: 'max-hold', outerIsHeld: true });
    } finally {
      useClockSource();
    }
  });
});
