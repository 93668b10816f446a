/**
 * The in-memory backend answers as the Redis one does: the same scenarios run on both, on the
 * shared Redis and in memory, and must leave the same transcript — replies, fences relative to the
 * first one, and the release messages heard (tokens, '1' for a forced release, fair hand-offs).
 * Times are real on both sides, so a PTTL is checked against a range, not compared.
 */
import { RedisBackend } from '../lib/backends/redis.backend';
import type { FairLockBackend } from '../lib/backends/lock-backend';
import { MemoryLockBackend } from '../lib/backends/memory.backend';
import { lockRedisKeys, LockRedisKeys } from '../lib/keys/lock-keys';
import { onSharedRedis } from './support/lock-services';
import { sleep, waitFor } from './support/time';

const shared = onSharedRedis('memory-contract');
const INSTANCE = 'contract-instance';

/** What one run of a scenario saw, normalized to compare across backends. */
class Transcript {
  readonly lines: unknown[] = [];
  readonly heard: string[] = [];
  private base?: number;

  /** A fence, as its distance from the first fence of the scenario. */
  fence(value: number): string {
    this.base ??= value;
    return `fence+${value - this.base}`;
  }

  /** A PTTL that must lie in [low, high] ms. */
  pttl(value: number, low: number, high: number): string {
    return value >= low && value <= high ? `pttl in [${low}, ${high}]` : `pttl ${value}`;
  }

  log(line: unknown): void {
    this.lines.push(line);
  }
}

type Scenario = (backend: FairLockBackend, keys: LockRedisKeys, t: Transcript) => Promise<void>;

/** Runs `scenario` on `backend`, listening to its lock's channel; resolves the transcript. */
async function run(
  backend: FairLockBackend,
  name: string,
  scenario: Scenario,
): Promise<Transcript> {
  const keys = lockRedisKeys(shared.prefix, name);
  const transcript = new Transcript();
  const pubsub = backend.createPubSub();
  pubsub.onMessage((channel, message) => {
    if (channel === keys.channel) transcript.heard.push(message);
  });
  await pubsub.subscribe(keys.channel);
  try {
    await scenario(backend, keys, transcript);
    await sleep(50); // let the last messages arrive
  } finally {
    pubsub.close();
  }
  // Fences in messages are compared the same way as fences in replies.
  const heard = transcript.heard.map((message) =>
    message.replace(/^grant:(.*):(\d+)$/, (_, token: string, fence: string) => {
      return `grant:${token}:${transcript.fence(Number(fence))}`;
    }),
  );
  transcript.heard.splice(0, transcript.heard.length, ...heard);
  return transcript;
}

async function onBoth(name: string, scenario: Scenario): Promise<void> {
  const redis = new RedisBackend(
    { client: shared.redis, owned: false },
    1_000,
    60_000,
    undefined,
    INSTANCE,
  );
  const memory = new MemoryLockBackend({ fenceRetention: 60_000, instanceId: INSTANCE });
  try {
    const onRedis = await run(redis, `${name}-redis`, scenario);
    const inMemory = await run(memory, `${name}-memory`, scenario);
    expect(inMemory.lines).toEqual(onRedis.lines);
    expect(inMemory.heard).toEqual(onRedis.heard);
  } finally {
    await redis.close();
    await memory.close();
  }
}

it('grants, refuses, renews, releases and force-releases alike', async () => {
  await onBoth('plain', async (backend, keys, t) => {
    t.log(t.fence(await backend.acquire(keys, 'a', 2_000)));
    t.log(t.pttl(-(await backend.acquire(keys, 'b', 2_000)), 1_500, 2_000));
    t.log(t.fence(await backend.acquire(keys, 'a', 2_000))); // a re-sent grant
    t.log(await backend.extend(keys, 'b', 5_000));
    t.log(await backend.extend(keys, 'a', 5_000));
    t.log(t.pttl(-(await backend.acquire(keys, 'b', 2_000)), 4_500, 5_000));
    const other = { redisKeys: keys, token: 'b', lease: 5_000, fence: 1 };
    const ours = { redisKeys: keys, token: 'a', lease: 5_000.5, fence: 1 };
    t.log(await backend.renewMany([ours, other]));
    t.log(await backend.release(keys, 'b'));
    t.log(await backend.release(keys, 'a'));
    t.log(await backend.release(keys, 'a'));
    t.log(t.fence(await backend.acquire(keys, 'b', 2_000)));
    t.log(await backend.isLocked(keys));
    t.log(await backend.forceRelease(keys));
    t.log(await backend.forceRelease(keys));
    t.log(await backend.isLocked(keys));
    await waitFor(() => t.heard.length === 2);
  });
});

it('lets a lease run out, and keeps counting fences after it', async () => {
  await onBoth('expiry', async (backend, keys, t) => {
    t.log(t.fence(await backend.acquire(keys, 'a', 50)));
    await sleep(100);
    t.log(await backend.isLocked(keys));
    t.log(await backend.extend(keys, 'a', 1_000));
    t.log(t.fence(await backend.acquire(keys, 'b', 1_000)));
    t.log(await backend.release(keys, 'a'));
  });
});

it('queues, hands over and leaves the fair queue alike', async () => {
  await onBoth('fair', async (backend, keys, t) => {
    const fair = (token: string, queue = true) =>
      backend.fairAcquire(keys, token, 5_000, queue, 1_000);
    const reply = async (token: string, queue = true): Promise<unknown> => {
      const answer = await fair(token, queue);
      if ('granted' in answer) return { granted: t.fence(answer.granted) };
      if ('ours' in answer) return { ours: t.fence(answer.ours), ...pttl(answer.pttl, 500, 1_000) };
      return { ...pttl(answer.retryAfterMs, 4_500, 5_000), fence: t.fence(answer.fence) };
    };
    const pttl = (value: number, low: number, high: number) => ({ ms: t.pttl(value, low, high) });
    t.log(await reply('a'));
    t.log(await reply('b'));
    t.log(await reply('c'));
    t.log(await reply('d', false));
    t.log(await backend.fairRelease(keys, 'a'));
    await waitFor(() => t.heard.length === 1);
    t.log(await reply('b'));
    t.log(await backend.fairRelease(keys, 'c')); // leaves the queue without holding
    t.log(await backend.fairRelease(keys, 'b')); // nobody left: freed, the token published
    t.log(await backend.isLocked(keys));
    t.log(await reply('d', false));
    t.log(await backend.fairRelease(keys, 'd'));
    await waitFor(() => t.heard.length === 3);
  });
});

it('inspects, lists and evicts alike: holder records written, renewed, handed over and removed', async () => {
  await onBoth('inspect', async (backend, keys, t) => {
    const started = Date.now();
    /** An inspection, normalized: token as is, times as ranges, the fence relative. */
    const inspect = async (low = 0, high = 5_000): Promise<unknown> => {
      const raw = await backend.inspectRaw(keys);
      const [since, id] = /^(\d+) (.*)$/.exec(raw.holder ?? '')?.slice(1) ?? [];
      const waiters: unknown[] = [];
      for (let i = 0; i < raw.waiters.length; i += 2) {
        const arrival = Number(raw.waiters[i]) / 1_000;
        waiters.push([arrival >= started - 5 && arrival <= Date.now() + 5, raw.waiters[i + 1]]);
      }
      return {
        token: raw.token,
        pttl: raw.token === null ? raw.pttl : t.pttl(raw.pttl, low, high),
        fence: raw.fence === 0 ? 0 : t.fence(raw.fence),
        holder: id === undefined ? null : [id, Number(since) >= started - 5],
        waiters,
      };
    };
    const listed = async (): Promise<boolean> => {
      let cursor: string | undefined;
      const names: string[] = [];
      do {
        const page = await backend.scan(shared.prefix, cursor, 10);
        names.push(...page.names);
        cursor = page.cursor;
      } while (cursor !== undefined);
      return names.includes(keys.lock);
    };
    t.log(await inspect());
    t.log(await listed());
    t.log(t.fence(await backend.acquire(keys, 'a', 2_000)));
    t.log(await inspect(1_500, 2_000));
    t.log(await listed());
    t.log(await backend.extend(keys, 'a', 5_000));
    t.log(await inspect(4_500, 5_000));
    t.log(await backend.release(keys, 'a'));
    t.log(await inspect());
    // Fair: a holder, two waiters, a hand-off.
    t.log(await backend.fairAcquire(keys, 'f1', 5_000, true, 1_000).then((r) => 'granted' in r));
    await backend.fairAcquire(keys, 'f2', 5_000, true, 1_000);
    await backend.fairAcquire(keys, 'f3', 5_000, true, 1_000);
    t.log(await inspect(4_500, 5_000));
    t.log(await backend.fairRelease(keys, 'f1'));
    t.log(await inspect(500, 1_000)); // handed to f2 with a short lease, f3 still queued
    const evicted = await backend.evict(keys);
    t.log(evicted && { fence: t.fence(evicted.fence), holder: evicted.holder?.instanceId });
    t.log(await backend.evict(keys));
    t.log(await inspect());
    // The last in line leaves a free lock: a wake-all (for readers the queue held back).
    await backend.fairRelease(keys, 'f3');
    await waitFor(() => t.heard.length === 4);
  });
});

it('shares, refuses, renews and releases read-write leases alike, writers waiting included', async () => {
  await onBoth('read-write', async (backend, keys, t) => {
    const reader = new LockRedisKeys(keys.lock, { type: 'shared' });
    let entered = 0;
    const waiting = (id: string) => ({
      waitingWriter: { id, entryMs: 3_000, entered: () => void entered++ },
    });
    t.log(t.fence(await backend.acquire(keys, 'w0', 2_000)));
    t.log(t.pttl(-(await backend.acquire(reader, 'r1', 2_000)), 1_500, 2_000)); // a writer holds
    t.log(await backend.release(keys, 'w0'));
    t.log(t.fence(await backend.acquire(reader, 'r1', 2_000))); // the last write's fence
    t.log(t.fence(await backend.acquire(reader, 'r2', 2_000)));
    t.log(t.fence(await backend.acquire(reader, 'r1', 2_000))); // a re-sent grant
    t.log(t.pttl(-(await backend.acquire(keys, 'w1', 2_000)), 1_500, 2_000)); // readers hold
    t.log(t.pttl(-(await backend.acquire(keys, 'w1', 5_000, waiting('w1'))), 500, 1_000));
    t.log(entered);
    t.log(t.pttl(-(await backend.acquire(reader, 'r3', 2_000)), 2_500, 3_000)); // w1 waits
    t.log(await backend.extend(reader, 'r1', 4_000));
    t.log(await backend.extend(reader, 'nobody', 4_000));
    const r2 = { redisKeys: reader, token: 'r2', lease: 4_000, fence: 1 };
    const gone = { redisKeys: keys, token: 'w-gone', lease: 4_000, fence: 1 };
    t.log(await backend.renewMany([r2, gone, { ...r2, token: 'r-gone' }]));
    await backend.leaveWriters?.(keys, 'w1');
    t.log(t.fence(await backend.acquire(reader, 'r3', 2_000))); // w1 left
    t.log(await backend.release(reader, 'r1'));
    t.log(await backend.release(reader, 'r1'));
    t.log(await backend.release(reader, 'r2'));
    t.log(await backend.release(reader, 'r3')); // the last reader: wakes all
    t.log(t.fence(await backend.acquire(keys, 'w2', 2_000, waiting('w2'))));
    t.log(entered);
    t.log(await backend.release(keys, 'w2'));
    // The writer's release, w1 leaving the waiting set, the last reader leaving, w2's release.
    await waitFor(() => t.heard.length === 4);
    t.log(t.heard);
  });
});

it('wakes all when the last in line leaves a free fair lock, not while it is held', async () => {
  await onBoth('fair-leave', async (backend, keys, t) => {
    const fair = (token: string) => backend.fairAcquire(keys, token, 5_000, true, 1_000);
    const reader = new LockRedisKeys(keys.lock, { type: 'shared' });
    t.log(t.fence(await backend.acquire(reader, 'r1', 2_000)));
    t.log('retryAfterMs' in (await fair('a')));
    t.log('retryAfterMs' in (await fair('b')));
    t.log(await backend.fairRelease(keys, 'a')); // b still queues: readers stay refused
    t.log(await backend.fairRelease(keys, 'b')); // the last in line, the lock free: wake-all
    t.log(await backend.fairRelease(keys, 'b')); // not queued any more: nothing
    t.log(await backend.release(reader, 'r1')); // the last reader: wake-all
    t.log('granted' in (await fair('w')));
    t.log('retryAfterMs' in (await fair('c')));
    t.log(await backend.fairRelease(keys, 'c')); // leaves while w holds: nothing
    t.log(await backend.fairRelease(keys, 'w'));
    await waitFor(() => t.heard.length === 3);
    t.log(t.heard);
  });
});
