/**
 * The all-or-nothing grant of several locks (`acquireAll`), and their release in one step
 * (`releaseAll`), answer alike on the Redis backend (one Lua script each) and the in-memory one:
 * the same scenario on both must leave the same transcript — replies, fences relative to the
 * first one seen per key, PTTLs within a range, and which locks are held afterwards.
 */
import { RedisBackend } from '../../lib/backends/redis.backend';
import type { AcquireAllReply, LockBackend } from '../../lib/backends/lock-backend';
import { MemoryLockBackend } from '../../lib/backends/memory.backend';
import { lockRedisKeys, type LockRedisKeys } from '../../lib/keys/lock-keys';
import { onSharedRedis } from '../support/lock-services';
import { sleep } from '../support/time';

const shared = onSharedRedis('acquire-all-contract');

type Scenario = (
  backend: LockBackend,
  keys: LockRedisKeys[],
  log: (line: unknown) => void,
) => Promise<void>;

/** Runs `scenario` on `backend` over three locks named from `name`; resolves its transcript. */
async function transcript(
  backend: LockBackend,
  name: string,
  scenario: Scenario,
): Promise<unknown[]> {
  const keys = ['a', 'b', 'c'].map((key) => lockRedisKeys(shared.prefix, `${name}:${key}`));
  const lines: unknown[] = [];
  const bases = new Map<number, number>();
  const normalize = (reply: AcquireAllReply): unknown => {
    if ('busy' in reply) {
      const { busy, retryAfterMs } = reply;
      return {
        busy,
        pttl: retryAfterMs >= 1_500 && retryAfterMs <= 2_000 ? 'in range' : retryAfterMs,
      };
    }
    return reply.fences.map((fence, i) => {
      if (!bases.has(i)) bases.set(i, fence);
      return `fence+${fence - bases.get(i)!}`;
    });
  };
  await scenario(backend, keys, (line) =>
    lines.push(
      typeof line === 'object' && line && ('busy' in line || 'fences' in line)
        ? normalize(line as AcquireAllReply)
        : line,
    ),
  );
  return lines;
}

it('grants all or none, and releases each key still ours, alike on Redis and in memory', async () => {
  const scenario: Scenario = async (backend, keys, log) => {
    const [a, b, c] = keys as [LockRedisKeys, LockRedisKeys, LockRedisKeys];
    const held = async () => Promise.all(keys.map((k) => backend.isLocked(k)));
    log(await backend.acquireAll!(keys, ['t1', 't2', 't3'], 2_000));
    log(await backend.acquireAll!(keys, ['t1', 't2', 't3'], 2_000)); // a re-sent grant: same fences
    log(await held());
    log(await backend.acquireAll!([c, a], ['u1', 'u2'], 2_000)); // busy: the first busy one
    log(await backend.releaseAll!([a, b, c], ['t1', 'not-t2', 't3'])); // b is not ours: it stays
    log(await held());
    await backend.release(b, 't2');
    log(await backend.acquire(b, 'other', 2_000).then((fence) => fence > 0));
    log(await backend.acquireAll!(keys, ['v1', 'v2', 'v3'], 2_000)); // b busy: nothing written
    log(await held());
    await backend.release(b, 'other');
    log(await backend.acquireAll!(keys, ['w1', 'w2', 'w3'], 2_000)); // every fence moved on
    log(await held());
    log(await backend.release(a, 'w1'));
    log(await backend.acquireAll!([a], ['x1'], 50));
    await sleep(100); // the short lease runs out
    log(await backend.isLocked(a));
  };
  const redis = new RedisBackend({ client: shared.redis, owned: false }, 1_000, 60_000);
  const memory = new MemoryLockBackend({ fenceRetention: 60_000 });
  try {
    const onRedis = await transcript(redis, 'redis', scenario);
    const inMemory = await transcript(memory, 'memory', scenario);
    expect(inMemory).toEqual(onRedis);
    // The scenario says what it should, not only the same on both.
    expect(onRedis[0]).toEqual(['fence+0', 'fence+0', 'fence+0']);
    expect(onRedis[1]).toEqual(onRedis[0]);
    expect(onRedis[3]).toEqual({ busy: 0, pttl: 'in range' });
    expect(onRedis[4]).toEqual([true, false, true]);
    expect(onRedis[5]).toEqual([false, true, false]);
    expect(onRedis[7]).toEqual({ busy: 1, pttl: 'in range' });
    expect(onRedis[8]).toEqual([false, true, false]);
    expect(onRedis[9]).toEqual(['fence+1', 'fence+2', 'fence+1']); // b was granted once between
    expect(onRedis[10]).toEqual([true, true, true]);
  } finally {
    await redis.close();
    await memory.close();
  }
});
