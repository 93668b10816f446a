/**
 * Scenario 3 — ambiguous replies: Redis executed an acquire or a release, but its reply never
 * reached the client (the connection died, or hung, right after). No lock may be left behind for
 * longer than its TTL, nobody may be granted a lock someone else holds, and a release reports a
 * definite outcome or a clear "unknown" error — never a false "not owner" to the true owner.
 */
import Redis from 'ioredis';
import { LockService, RedisUnavailableError, type LockHandle } from 'nestjs-redis-lock';
import { startRedis, stopAllRedis, type RedisServer } from '../support/redis-server';
import { closeAllProxies, startTcpProxy, type TcpProxy } from '../support/tcp-proxy';
import { now, sleep } from '../support/time';
import { errorName, lockCommand, lockKeys, ms, observe, outcome } from './fault-support';

const PREFIX = 'ambiguous:';
const TTL = 800;
const COMMAND_TIMEOUT = 500;

let server: RedisServer;
let redis: Redis;
let other: LockService;
const services: LockService[] = [];
const proxies: TcpProxy[] = [];

/** A fresh proxy and a LockService behind it, with its scripts loaded on the server. */
async function clientThroughProxy(): Promise<{ proxy: TcpProxy; locks: LockService }> {
  const proxy = await startTcpProxy(server.port);
  proxies.push(proxy);
  const locks = new LockService({
    redis: proxy.url,
    prefix: PREFIX,
    ttl: TTL,
    commandTimeout: COMMAND_TIMEOUT,
  });
  services.push(locks);
  // A budget to connect in: on a loaded machine the first command can outlast commandTimeout.
  await (await locks.acquire(`warm-up:${proxy.port}`, { wait: 10_000 })).release();
  return { proxy, locks };
}

beforeAll(async () => {
  server = await startRedis();
  redis = new Redis(server.url);
  other = new LockService({ redis: server.url, prefix: PREFIX, ttl: TTL });
  services.push(other);
});

afterAll(async () => {
  for (const proxy of proxies) proxy.heal(); // a failed test must not leave a service unreachable
  await Promise.all(services.map((service) => service.close()));
  await closeAllProxies();
  redis?.disconnect();
  await stopAllRedis();
});

/**
 * While the orphaned grant of `key` lives, nobody else gets the lock; it frees within its TTL.
 * Resolves how long after `since` another instance acquired it.
 */
async function expectOrphanBoundedByTtl(key: string, since: number): Promise<number> {
  const pttl = await redis.pttl(lockKeys(PREFIX, key).lock);
  expect(pttl).toBeLessThanOrEqual(TTL);
  if (pttl > 0) expect(await other.tryAcquire(key)).toBeNull(); // no double grant
  const next = await other.acquire(key, { wait: TTL + 500 });
  const freedAfter = now() - since;
  expect(freedAfter).toBeLessThan(TTL + 300);
  expect(await next.release()).toBe(true);
  return freedAfter;
}

describe('scenario 3: the reply of an acquire is lost after Redis granted it', () => {
  it('connection reset: no double grant, and the orphaned grant frees within its TTL', async () => {
    const { proxy, locks } = await clientThroughProxy();
    const key = 'acquire-reset';
    void proxy.dropReplyTo(lockCommand.acquire(PREFIX, key), 'reset');
    const started = now();
    const result = await outcome(locks.acquire(key));
    const orphanToken = await redis.get(lockKeys(PREFIX, key).lock);
    expect(orphanToken).not.toBeNull(); // Redis did grant it

    if (result.ok) {
      expect(result.value.token).toBe(orphanToken); // the caller's own grant
      expect(await other.tryAcquire(key)).toBeNull(); // and nobody else's
    }
    const freedAfter = result.ok ? 0 : await expectOrphanBoundedByTtl(key, started);
    if (result.ok) await result.value.release();
    observe('3-acquire-reset', {
      outcome: result.ok ? 'lock' : errorName(result.error),
      message: result.ok ? undefined : (result.error as Error).message,
      orphanFreedAfter: ms(freedAfter),
    });
  });

  it('connection reset: a waiting caller gets its own grant, without waiting out its own orphan', async () => {
    // ioredis re-sends the acquire on the new connection; the script then finds the caller's own
    // token on the key and answers "busy", so the caller waits for itself until the TTL ends.
    const { proxy, locks } = await clientThroughProxy();
    const key = 'acquire-reset-own-token';
    void proxy.dropReplyTo(lockCommand.acquire(PREFIX, key), 'reset');
    const started = now();
    const result = await outcome(locks.acquire(key, { wait: 2_000 }));
    const took = now() - started;
    const orphan = await redis.get(lockKeys(PREFIX, key).lock);
    if (result.ok) await result.value.release();
    observe('3-acquire-reset-own-token', {
      outcome: result.ok ? 'lock' : errorName(result.error),
      took: ms(took),
      ttl: TTL,
    });
    expect(result.ok).toBe(true);
    expect((result as { value: LockHandle }).value.token).toBe(orphan);
    expect(took).toBeLessThan(COMMAND_TIMEOUT + 500);
  });

  it('connection hangs: RedisUnavailableError within commandTimeout, the orphan frees within its TTL', async () => {
    const { proxy, locks } = await clientThroughProxy();
    const key = 'acquire-stall';
    void proxy.dropReplyTo(lockCommand.acquire(PREFIX, key), 'stall');
    const started = now();
    const result = await outcome(locks.acquire(key));
    const took = now() - started;
    expect(result.ok).toBe(false);
    expect((result as { error: unknown }).error).toBeInstanceOf(RedisUnavailableError);
    expect(took).toBeLessThan(COMMAND_TIMEOUT + 500);
    expect(await redis.get(lockKeys(PREFIX, key).lock)).not.toBeNull();

    proxy.heal(); // the hung connection is reset; ioredis re-sends what was unanswered
    const freedAfter = await expectOrphanBoundedByTtl(key, started);
    observe('3-acquire-stall', { failedAfter: ms(took), orphanFreedAfter: ms(freedAfter) });
  });
});

describe('scenario 3: the reply of a release is lost after Redis deleted the key', () => {
  /** Acquires `key` through the proxy and arms the proxy to lose its release reply. */
  async function heldWithLostRelease(then: 'reset' | 'stall', key: string) {
    const { proxy, locks } = await clientThroughProxy();
    const lost = jest.fn();
    locks.on('lost', lost);
    const lock = await locks.acquire(key);
    const dropped = proxy.dropReplyTo(lockCommand.release(PREFIX, key), then);
    return { proxy, locks, lock, lost, dropped };
  }

  function expectNotReportedLost(lock: LockHandle, lost: jest.Mock): void {
    expect(lost).not.toHaveBeenCalled();
    expect(lock.signal.aborted).toBe(false);
  }

  it('connection reset: resolves true or rejects "unknown", never false / lost for the true owner', async () => {
    const key = 'release-reset';
    const { lock, lost, dropped } = await heldWithLostRelease('reset', key);
    const result = await outcome(lock.release());
    await dropped;
    expect(await redis.exists(lockKeys(PREFIX, key).lock)).toBe(0);
    observe('3-release-reset', {
      outcome: result.ok ? String(result.value) : errorName(result.error),
      lostEvents: lost.mock.calls.length,
    });
    if (result.ok) expect(result.value).toBe(true);
    else expect(result.error).toBeInstanceOf(RedisUnavailableError);
    expectNotReportedLost(lock, lost);
  });

  it('connection reset: withLock() resolves the work of a holder that kept its lock to the end', async () => {
    const key = 'withlock-release-reset';
    const { proxy, locks } = await clientThroughProxy();
    void proxy.dropReplyTo(lockCommand.release(PREFIX, key), 'reset');
    const result = await outcome(locks.withLock(key, () => 'done'));
    observe('3-withlock-release-reset', {
      outcome: result.ok ? String(result.value) : errorName(result.error),
    });
    expect(result).toEqual({ ok: true, value: 'done' });
  });

  it('connection hangs: rejects with RedisUnavailableError within commandTimeout; key gone', async () => {
    const key = 'release-stall';
    const { proxy, lock, lost } = await heldWithLostRelease('stall', key);
    const started = now();
    const result = await outcome(lock.release());
    const took = now() - started;
    expect(result.ok).toBe(false);
    expect((result as { error: unknown }).error).toBeInstanceOf(RedisUnavailableError);
    expect(took).toBeLessThan(COMMAND_TIMEOUT + 500);
    expect(await redis.exists(lockKeys(PREFIX, key).lock)).toBe(0);
    expectNotReportedLost(lock, lost);
    proxy.heal();
    await sleep(100);
    expect(await redis.exists(lockKeys(PREFIX, key).lock)).toBe(0);
    observe('3-release-stall', {
      outcome: errorName((result as { error: unknown }).error),
      after: ms(took),
    });
  });
});

describe('scenario 3: the reply of a renewal is lost', () => {
  it('connection reset: the holder keeps its lock, nothing is reported lost', async () => {
    const { proxy, locks } = await clientThroughProxy();
    const lost = jest.fn();
    locks.on('lost', lost);
    const key = 'renewal-reset';
    const lock = await locks.acquire(key);
    await proxy.dropReplyTo(lockCommand.extend(PREFIX, key), 'reset');
    await sleep(TTL * 1.5);
    expect(lost).not.toHaveBeenCalled();
    expect(lock.isHeld).toBe(true);
    expect(await redis.get(lockKeys(PREFIX, key).lock)).toBe(lock.token);
    expect(await lock.release()).toBe(true);
  });
});
