/**
 * Scenario 4 — Redis restarts (crash, no persistence) while locks are held and waited for. Holders
 * learn their locks are gone (signal), waiters recover and acquire on the fresh server, the Lua
 * scripts are loaded again (NOSCRIPT handled), and no process hangs.
 */
import Redis from 'ioredis';
import { LockLostError, LockService, type LockHandle } from 'nestjs-redis-lock';
import { CONNECT_BUDGET } from '../support/lock-services';
import { killAllWorkers, spawnWorker, type Worker } from '../support/processes';
import { startRedis, stopAllRedis, type RedisServer } from '../support/redis-server';
import { now } from '../support/time';
import { errorName, ms, observe, outcome } from './fault-support';

const PREFIX = 'restart:';
const TTL = 900;
const HOLDERS = 5;

let server: RedisServer;
let probe: Redis;
let worker: Worker;
const services: LockService[] = [];

function service(): LockService {
  const locks = new LockService({
    redis: server.url,
    prefix: PREFIX,
    ttl: TTL,
    commandTimeout: 500,
  });
  services.push(locks);
  return locks;
}

/** Crashes the server (SIGKILL, nothing saved) and starts an empty one on the same port. */
async function crashAndRestart(): Promise<number> {
  const started = now();
  await server.kill();
  await server.restart();
  return now() - started;
}

const abortedAt = (lock: LockHandle): Promise<number> =>
  new Promise((resolve) => lock.signal.addEventListener('abort', () => resolve(now())));

beforeAll(async () => {
  server = await startRedis();
  probe = new Redis(server.url, { maxRetriesPerRequest: 1 });
  probe.on('error', () => undefined);
  // Another app instance, cycling withLock() through the restart; it must exit by itself.
  worker = spawnWorker('test/fault/fixtures/lock-loop-worker.ts', {
    REDIS_URL: server.url,
    PREFIX,
    KEY: 'worker',
    TTL: String(TTL),
    DURATION: '2500',
  });
});

afterAll(async () => {
  await killAllWorkers();
  await Promise.all(services.map((locks) => locks.close()));
  probe?.disconnect();
  await stopAllRedis();
});

describe('scenario 4: Redis restarts while locks are held', () => {
  it('holders see their locks lost, waiters acquire on the new server, nothing hangs', async () => {
    const holders = service();
    const waiters = service();
    await worker.waitForOutput(/^ready$/m, 30_000);
    worker.send('go');

    const held = await Promise.all(
      Array.from({ length: HOLDERS }, (_, i) => holders.acquire(`held:${i}`, CONNECT_BUDGET)),
    );
    const losses = held.map(abortedAt);
    const waiting = held.map((_, i) =>
      outcome(waiters.acquire(`held:${i}`, { wait: 6_000 })).then((result) => ({
        result,
        at: now(),
      })),
    );
    const restartTook = await crashAndRestart();
    const restartedAt = now();

    const lostAt = await Promise.all(losses);
    for (const lock of held) {
      expect(lock.signal.reason).toBeInstanceOf(LockLostError);
      expect(await lock.release()).toBe(false);
    }
    const acquired = await Promise.all(waiting);
    for (const { result } of acquired) expect(result.ok).toBe(true);
    for (const { result } of acquired) {
      if (result.ok) expect(await result.value.release()).toBe(true);
    }

    // NOSCRIPT: the first EVALSHA on the empty server failed, the EVAL fallback loaded the script.
    const stats = await probe.info('commandstats');
    expect(stats).toMatch(/cmdstat_eval:calls=[1-9]/);
    expect(stats).toMatch(/cmdstat_evalsha:calls=[1-9]/);

    // The other process kept cycling through the restart and exited by itself.
    const [, report] = await worker.waitForOutput(/^report (.*)$/m, 15_000);
    await worker.succeeded();
    const outcomes = JSON.parse(report!) as Record<string, number>;
    expect(outcomes.ok).toBeGreaterThan(10);

    const closing = now();
    await Promise.all([holders.close(), waiters.close()]);
    const closeTook = now() - closing;
    expect(closeTook).toBeLessThan(1_000);

    observe('4-restart', {
      ttl: TTL,
      holders: HOLDERS,
      restartTook: ms(restartTook),
      lostAfterRestart: lostAt.map((at) => ms(at - restartedAt)),
      lossReasons: held.map((lock) => (lock.signal.reason as LockLostError).reason),
      waitersAcquiredAfterRestart: acquired.map(({ at }) => ms(at - restartedAt)),
      workerOutcomes: outcomes,
      closeTook: ms(closeTook),
    });
  });

  it('keeps fences increasing across a restart that lost the counters', async () => {
    // A fenced store that saw fence N before the restart refuses every holder after it until the
    // counter climbs past N again: the fence must not start over.
    const locks = service();
    let before = 0;
    for (let i = 0; i < 3; i++) {
      const lock = await locks.acquire('fenced', CONNECT_BUDGET);
      before = lock.fence;
      await lock.release();
    }
    await crashAndRestart();
    const after = await outcome(locks.acquire('fenced', { wait: 3_000 }));
    expect(after.ok).toBe(true);
    const lock = (after as { value: LockHandle }).value;
    await lock.release();
    observe('4-fence-after-restart', { before, after: lock.fence });
    expect(lock.fence).toBeGreaterThan(before);
  });

  it('a waiter that finds Redis down for longer than commandTimeout fails with a clear error', async () => {
    const holders = service();
    const waiters = service();
    await holders.acquire('down', CONNECT_BUDGET);
    const waiting = outcome(waiters.acquire('down', { wait: 1_500 }));
    await server.kill();
    const started = now();
    const result = await waiting;
    const took = now() - started;
    await server.restart();
    expect(result.ok).toBe(false);
    expect(errorName((result as { error: unknown }).error)).toMatch(
      /RedisUnavailableError|LockNotAcquiredError/,
    );
    expect(took).toBeLessThan(1_500 + 500 + 250);
    observe('4-down', {
      outcome: errorName((result as { error: unknown }).error),
      after: ms(took),
    });
  });
});
