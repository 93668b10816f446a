/**
 * The in-memory backend (nestjs-redis-lock/testing) serves semaphores as the Redis scripts do:
 * the same permit scenarios run on the shared Redis and in memory and must leave the same
 * transcript (replies, fences relative to the first, release messages heard). Then the testing
 * module runs `@Locked` with `permits` with no Redis at all.
 */
import { Injectable } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import {
  Locked,
  LockNotAcquiredError,
  LockService,
  SemaphoreLimitConflictError,
} from 'nestjs-redis-lock';
import { RedisLockTestingModule } from 'nestjs-redis-lock/testing';
import type { LockBackend } from '../../lib/backends/lock-backend';
import { MemoryLockBackend } from '../../lib/backends/memory.backend';
import { RedisBackend } from '../../lib/backends/redis.backend';
import { lockRedisKeys, type LockRedisKeys } from '../../lib/keys/lock-keys';
import { onSharedRedis } from '../support/lock-services';
import { Gate, sleep, waitFor } from '../support/time';

const shared = onSharedRedis('sem-contract');

type Log = unknown[];
/** What a scenario gets: its backend, its keys (2 permits), and the same key with another N. */
interface Run {
  backend: LockBackend;
  keys: LockRedisKeys;
  withLimit: (permits: number) => LockRedisKeys;
  log: Log;
  fence: (f: number) => string;
}
type Scenario = (run: Run) => Promise<void>;

async function run(backend: LockBackend, name: string, scenario: Scenario) {
  const withLimit = (permits: number): LockRedisKeys =>
    lockRedisKeys(shared.prefix, name, { type: 'semaphore', permits });
  const keys = withLimit(2);
  const log: Log = [];
  const heard: string[] = [];
  let base: number | undefined;
  const fence = (f: number): string => `fence+${f - (base ??= f)}`;
  const pubsub = backend.createPubSub();
  pubsub.onMessage((channel, message) => channel === keys.channel && heard.push(message));
  await pubsub.subscribe(keys.channel);
  try {
    await scenario({ backend, keys, withLimit, log, fence });
    await sleep(50);
  } finally {
    pubsub.close();
  }
  return { log, heard };
}

async function onBoth(name: string, scenario: Scenario): Promise<void> {
  const redis = new RedisBackend({ client: shared.redis, owned: false }, 1_000, 60_000);
  const memory = new MemoryLockBackend({ fenceRetention: 60_000 });
  try {
    const onRedis = await run(redis, `${name}-redis`, scenario);
    const inMemory = await run(memory, `${name}-memory`, scenario);
    expect(inMemory).toEqual(onRedis);
  } finally {
    await redis.close();
    await memory.close();
  }
}

const busyWithin = (reply: number, low: number, high: number): string =>
  -reply >= low && -reply <= high ? `busy in [${low}, ${high}]` : `reply ${reply}`;

describe('permit leases on Redis and in memory', () => {
  it('grant N, busy with the soonest lease end, re-sent grant, renew, release, limit conflict', async () => {
    await onBoth('basic', async ({ backend, keys, withLimit, log, fence }) => {
      log.push(fence(await backend.acquire(keys, 'a', 5_000)));
      log.push(fence(await backend.acquire(keys, 'b', 2_000)));
      log.push(busyWithin(await backend.acquire(keys, 'c', 2_000), 1_500, 2_000));
      log.push(fence(await backend.acquire(keys, 'a', 5_000)) !== 'fence+0'); // re-sent: a new fence of its own
      log.push(await backend.extend(keys, 'b', 8_000));
      log.push(busyWithin(await backend.acquire(keys, 'c', 2_000), 4_500, 5_000));
      log.push(await backend.extend(keys, 'c', 8_000));
      const lease = (token: string) => ({ redisKeys: keys, token, lease: 6_000.5, fence: 1 });
      log.push(await backend.renewMany([lease('a'), lease('c'), lease('b')]));
      const conflict = withLimit(3);
      log.push(
        await backend
          .acquire(conflict, 'd', 1_000)
          .catch((e: unknown) => e instanceof SemaphoreLimitConflictError),
      );
      log.push(await backend.release(keys, 'b'));
      log.push(await backend.release(keys, 'b'));
      log.push(fence(await backend.acquire(keys, 'c', 1_000)));
      log.push(await backend.isLocked(keys));
      log.push(await backend.evict(keys).then((e) => e && fence(e.fence)));
      log.push(await backend.isLocked(keys));
      log.push(await backend.forceRelease(keys));
      log.push(fence(await backend.acquire(conflict, 'd', 1_000))); // free: a new limit is fine
      log.push(await backend.release(conflict, 'd'));
    });
  });

  it('lets a permit lapse: its place is taken, its renewal and release answer "not ours"', async () => {
    await onBoth('lapse', async ({ backend, keys, log, fence }) => {
      log.push(fence(await backend.acquire(keys, 'a', 50)));
      log.push(fence(await backend.acquire(keys, 'b', 50)));
      await sleep(100);
      log.push(await backend.isLocked(keys));
      log.push(await backend.extend(keys, 'a', 1_000));
      log.push(fence(await backend.acquire(keys, 'c', 1_000)));
      log.push(await backend.release(keys, 'b'));
      log.push(await backend.release(keys, 'c'));
    });
  });
});

@Injectable()
class Exports {
  readonly gate = new Gate();
  running = 0;

  @Locked('export:<tenantId>', { permits: 2 })
  async run(tenantId: string): Promise<string> {
    this.running++;
    await this.gate.opened;
    this.running--;
    return tenantId;
  }
}

describe('RedisLockTestingModule', () => {
  it('runs @Locked with permits in memory: N at once, the next busy, no Redis', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [RedisLockTestingModule.forRoot()],
      providers: [Exports],
    }).compile();
    try {
      const exports = moduleRef.get(Exports);
      const calls = [exports.run('acme'), exports.run('acme')];
      await waitFor(() => exports.running === 2);
      await expect(exports.run('acme')).rejects.toBeInstanceOf(LockNotAcquiredError);
      const locks = moduleRef.get(LockService);
      await expect(locks.acquire('export:acme', { permits: 5 })).rejects.toBeInstanceOf(
        SemaphoreLimitConflictError,
      );
      const waiting = locks.withLock('export:acme', () => 'third', { permits: 2, wait: 5_000 });
      exports.gate.release();
      expect(await Promise.all([...calls, waiting])).toEqual(['acme', 'acme', 'third']);
    } finally {
      await moduleRef.close();
    }
  });
});
