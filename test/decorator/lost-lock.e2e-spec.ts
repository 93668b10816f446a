/**
 * A lock lost while the `@Locked` method runs: its signal aborts at once, and when the method
 * settles the caller gets `LockLostError` (`onLost: 'throw'`; what a route answers then is tested
 * on both HTTP platforms in `http-routes.e2e-spec.ts`) or only a log (`onLost: 'log'`). Loss is simulated by another LockService force-releasing the key, or by
 * deleting the key and letting the next renewal (ttl / 3) find it gone.
 */
import { Injectable, Logger, type INestApplication } from '@nestjs/common';
import type Redis from 'ioredis';
import { currentLock, LockLostError, LockService, Locked } from 'nestjs-redis-lock';
import { deleteKeys, redisClient, SHARED_REDIS_URL } from '../support/shared-redis';
import { uniquePrefix } from '../support/unique-prefix';
import { createDecoratorApp, leaseKey } from './decorator-app';

const prefix = uniquePrefix('decorator-lost');
const TTL = 600;

/** What the method saw of its own lock. */
interface Observed {
  abortedAfterMs: number;
  reason: unknown;
}

/** Waits (up to `max` ms) for the running method's lock signal to abort. */
function untilAborted(max = 3_000): Promise<Observed> {
  const { signal } = currentLock()!;
  const started = performance.now();
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      resolve({ abortedAfterMs: performance.now() - started, reason: signal.reason });
    };
    const timer = setTimeout(done, max);
    if (signal.aborted) done();
    else signal.addEventListener('abort', done, { once: true });
  });
}

@Injectable()
class JobService {
  observed?: Observed;
  /** Called once the method holds its lock, to take it away. */
  loseIt: (key: string) => Promise<unknown> = async () => undefined;

  @Locked('job:<id>', { ttl: TTL, onLost: 'throw' })
  async strict(id: string): Promise<string> {
    await this.loseIt(`job:${id}`);
    this.observed = await untilAborted();
    return 'finished';
  }

  @Locked('job:<id>', { ttl: TTL, onLost: 'log' })
  async lenient(id: string): Promise<string> {
    await this.loseIt(`job:${id}`);
    this.observed = await untilAborted();
    return 'finished anyway';
  }
}

describe('a lock lost while the @Locked method runs', () => {
  let app: INestApplication;
  let jobs: JobService;
  let locks: LockService;
  /** An operator's LockService on the same Redis and prefix, in "another process". */
  let operator: LockService;
  let redis: Redis;
  let warn: jest.SpyInstance;

  beforeAll(async () => {
    redis = redisClient();
    app = await createDecoratorApp({
      prefix,
      providers: [JobService],
    });
    jobs = app.get(JobService);
    locks = app.get(LockService);
    operator = new LockService({ redis: SHARED_REDIS_URL, prefix });
  });

  afterAll(async () => {
    await operator.close();
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  beforeEach(() => {
    jobs.observed = undefined;
    warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  });

  afterEach(() => warn.mockRestore());

  it("onLost 'throw': the signal aborts and the caller gets LockLostError (force-released)", async () => {
    jobs.loseIt = (key) => operator.forceRelease(key);
    const lost: LockLostError[] = [];
    locks.on('lost', (error) => lost.push(error));

    const attempt = jobs.strict('a');
    await expect(attempt).rejects.toBeInstanceOf(LockLostError);
    await expect(attempt).rejects.toMatchObject({ key: 'job:a', reason: 'not-owner' });
    // Found by the first renewal, at ttl / 3 — well before the lease would have run out.
    expect(jobs.observed!.reason).toBeInstanceOf(LockLostError);
    expect(jobs.observed!.abortedAfterMs).toBeLessThan(TTL);
    expect(lost.map((error) => error.key)).toEqual(['job:a']);
  });

  it("onLost 'throw': the same when the key was deleted and the renewal finds it gone", async () => {
    jobs.loseIt = (key) => redis.del(leaseKey(prefix, key));
    await expect(jobs.strict('b')).rejects.toBeInstanceOf(LockLostError);
    expect(jobs.observed!.reason).toBeInstanceOf(LockLostError);
  });

  it("never deletes the new owner's key after a loss", async () => {
    let newOwner: Awaited<ReturnType<LockService['acquire']>> | undefined;
    jobs.loseIt = async (key) => {
      await operator.forceRelease(key);
      newOwner = await operator.acquire(key);
    };
    await expect(jobs.strict('c')).rejects.toBeInstanceOf(LockLostError);
    expect(newOwner!.isHeld).toBe(true);
    expect(await redis.get(leaseKey(prefix, 'job:c'))).toBe(newOwner!.token);
    await expect(newOwner!.release()).resolves.toBe(true);
  });

  it("onLost 'log': the signal aborts, the caller gets the result, and the loss is logged", async () => {
    jobs.loseIt = (key) => operator.forceRelease(key);
    await expect(jobs.lenient('d')).resolves.toBe('finished anyway');
    expect(jobs.observed!.reason).toBeInstanceOf(LockLostError);
    const logged = warn.mock.calls.map(([message]) => String(message));
    expect(logged.some((message) => message.includes('Lock "job:d" was lost'))).toBe(true);
  });
});
