/**
 * The in-memory backend answers as the Redis one does: the same scenarios run on both, on the
 * shared Redis and in memory, and must leave the same transcript — replies, fences relative to the
 * first one, and the release messages heard (tokens, '1' for a forced release, fair hand-offs).
 * Times are real on both sides, so a PTTL is checked against a range, not compared.
 */
import { RedisBackend } from '../lib/backends/redis.backend';
import type { FairLockBackend } from '../lib/backends/lock-backend';
import type { EvictedKind } from '../lib/backends/lock-eviction';
import { MemoryLockBackend } from '../lib/backends/memory.backend';
import { SemaphoreLimitConflictError } from '../lib/errors/errors';
import type { LeaseKind } from '../lib/keys/lease-kind';
import { kindKeysOf, lockRedisKeys, LockRedisKeys } from '../lib/keys/lock-keys';
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

/**
 * Runs `scenario` on `backend` for a lock of `kind` (default: a mutex), listening to its lock's
 * channel; resolves the transcript.
 */
async function run(
  backend: FairLockBackend,
  name: string,
  scenario: Scenario,
  kind?: LeaseKind,
): Promise<Transcript> {
  const keys = lockRedisKeys(shared.prefix, name, kind);
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

async function onBoth(name: string, scenario: Scenario, kind?: LeaseKind): Promise<void> {
  const redis = new RedisBackend(
    { client: shared.redis, owned: false },
    1_000,
    60_000,
    undefined,
    INSTANCE,
  );
  const memory = new MemoryLockBackend({ fenceRetention: 60_000, instanceId: INSTANCE });
  try {
    const onRedis = await run(redis, `${name}-redis`, scenario, kind);
    const inMemory = await run(memory, `${name}-memory`, scenario, kind);
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
    t.log(await backend.fairRelease(keys, 'd')); // nobody waited for d: nothing published
    await waitFor(() => t.heard.length === 2);
  });
});

/** A fair try's reply, as its kind: 'granted', 'ours' or 'retryAfterMs'. */
const replyKind = (reply: object): string => Object.keys(reply)[0]!;

/**
 * Until `keys` is held by nobody: the leases in it lapsed (not released), and the ms the last one
 * ended in is over — a share counts for another kind through that ms, so a try in it answers
 * "busy, retry in 0 ms" on both stores, which is not what these scenarios are about. Bounded.
 */
const lapsed = async (backend: FairLockBackend, keys: LockRedisKeys): Promise<void> => {
  await waitFor(async () => !(await backend.isLocked(keys)), 3_000, 5);
  await sleep(2);
};

it("keeps a fair lock freed by the holder's lapsed lease for the head of the queue alike", async () => {
  await onBoth('fair-lapse', async (backend, keys, t) => {
    const fair = (token: string, ttl = 5_000, queue = true) =>
      backend.fairAcquire(keys, token, ttl, queue, 5_000);
    const h = await fair('h', 100);
    t.log('granted' in h && t.fence(h.granted));
    t.log(replyKind(await fair('w1'))); // queued behind h
    await lapsed(backend, keys); // h's lease ran out: no release handed the lock on
    const newcomer = await fair('n', 5_000, false);
    expect(replyKind(newcomer)).toBe('retryAfterMs'); // free, but reserved for w1
    t.log('retryAfterMs' in newcomer && t.pttl(newcomer.retryAfterMs, 1, 5_000));
    t.log(await backend.isLocked(keys)); // still free: the newcomer did not take it
    const head = await fair('w1');
    expect(replyKind(head)).toBe('granted');
    t.log('granted' in head && t.fence(head.granted));
    t.log(await backend.fairRelease(keys, 'h')); // lapsed: not h's any more
    // Nobody waited for w1 (nobody left in line when it took the lock): nothing is published.
    t.log(await backend.fairRelease(keys, 'w1'));
  });
});

it("keeps a fair lock the last reader's lapsed share left free for the queued writer alike", async () => {
  await onBoth('fair-lapse-read', async (backend, keys, t) => {
    const reader = new LockRedisKeys(keys.lock, { type: 'read' });
    const fair = (token: string, queue = true) =>
      backend.fairAcquire(keys, token, 5_000, queue, 5_000);
    t.log(t.fence(await backend.acquire(reader, 'r1', 100)));
    t.log(replyKind(await fair('w1'))); // a writer, queued behind the reader
    await lapsed(backend, keys); // r1's share ran out: no release woke w1
    const writer = await fair('n', false);
    expect(replyKind(writer)).toBe('retryAfterMs'); // free, but reserved for w1
    t.log('retryAfterMs' in writer && t.pttl(writer.retryAfterMs, 1, 5_000));
    const share = await backend.acquire(reader, 'r2', 2_000);
    expect(share).toBeLessThan(0); // readers stay behind the queued writer
    t.log(t.pttl(-share, 1, 5_000));
    t.log(await backend.isLocked(keys));
    const head = await fair('w1');
    expect(replyKind(head)).toBe('granted');
    t.log('granted' in head && t.fence(head.granted));
    t.log(await backend.release(reader, 'r1')); // lapsed: gone
    // Nobody waited for w1 (nobody left in line when it took the lock): nothing is published.
    t.log(await backend.fairRelease(keys, 'w1'));
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
    // 'a' released unrefused (no message); f1's hand-off, the eviction, the wake-all.
    await waitFor(() => t.heard.length === 3);
  });
});

it('shares, refuses, renews and releases read-write leases alike, writers waiting included', async () => {
  await onBoth('read-write', async (backend, keys, t) => {
    const reader = new LockRedisKeys(keys.lock, { type: 'read' });
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
    // The writer's release (r1 was refused by it), w1 leaving the waiting set, the last reader
    // leaving; w2's release wakes nobody: no try was refused while it held.
    await waitFor(() => t.heard.length === 3);
    t.log(t.heard);
  });
});

it("marks a writer's lease granted out of the writers waiting alike: its release wakes", async () => {
  await onBoth('writer-waited', async (backend, keys, t) => {
    const reader = new LockRedisKeys(keys.lock, { type: 'read' });
    const waiting = { waitingWriter: { id: 'w', entryMs: 3_000, entered: () => undefined } };
    t.log(t.fence(await backend.acquire(reader, 'r1', 2_000)));
    t.log(t.pttl(-(await backend.acquire(keys, 'w', 5_000, waiting)), 500, 1_000)); // waits
    t.log(await backend.release(reader, 'r1')); // the last reader: wakes all
    t.log(t.fence(await backend.acquire(keys, 'w', 5_000, waiting)));
    t.log(await backend.release(keys, 'w')); // wakes the readers it held back
    await waitFor(() => t.heard.length === 2);
    t.log(t.heard);
  });
});

it('marks a lease handed out of the fair queue alike, to the last in line too', async () => {
  await onBoth('fair-last', async (backend, keys, t) => {
    const fair = (token: string) => backend.fairAcquire(keys, token, 5_000, true, 1_000);
    const reader = new LockRedisKeys(keys.lock, { type: 'read' });
    t.log('granted' in (await fair('a')));
    t.log('retryAfterMs' in (await fair('b')));
    t.log((await backend.acquire(reader, 'r1', 2_000)) < 0); // the queue holds readers back
    t.log(await backend.fairRelease(keys, 'a')); // hands over to b, the last in line
    t.log(await backend.fairRelease(keys, 'b')); // wakes the reader
    await waitFor(() => t.heard.length === 2);
    t.log(t.heard);
  });
});

it('wakes all when the last in line leaves a free fair lock, not while it is held', async () => {
  await onBoth('fair-leave', async (backend, keys, t) => {
    const fair = (token: string) => backend.fairAcquire(keys, token, 5_000, true, 1_000);
    const reader = new LockRedisKeys(keys.lock, { type: 'read' });
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

describe('fair semaphores', () => {
  const TWO = { type: 'semaphore', permits: 2 } as const;
  /** A fair permit try's reply, normalized: fences relative, a busy reply's ms as a range. */
  const replyOf = async (
    t: Transcript,
    answer: Promise<Awaited<ReturnType<FairLockBackend['fairAcquire']>>>,
    [low, high] = [4_000, 5_000],
  ): Promise<unknown> => {
    const reply = await answer;
    if ('granted' in reply) return { granted: t.fence(reply.granted) };
    if ('ours' in reply) return { ours: t.fence(reply.ours) };
    return { ms: t.pttl(reply.retryAfterMs, low, high), fence: t.fence(reply.fence) };
  };

  it('grants N, queues the rest, hands freed permits to the first in line, and leaves alike', async () => {
    await onBoth(
      'fair-permits',
      async (backend, keys, t) => {
        const fair = (token: string, queue = true) =>
          replyOf(t, backend.fairAcquire(keys, token, 5_000, queue, 1_000));
        const granted = [await fair('a'), await fair('b')];
        // Two places, two grants: a semaphore, not a mutex.
        expect(granted.every((reply) => typeof reply === 'object' && 'granted' in reply!)).toBe(
          true,
        );
        t.log(granted);
        t.log(await fair('c')); // full: queued
        t.log(await fair('d')); // queued behind c
        t.log(await fair('e', false)); // busy, not queued
        const other = new LockRedisKeys(keys.lock, { type: 'semaphore', permits: 3 });
        const conflict = backend.fairAcquire(other, 'f', 5_000, true, 1_000);
        t.log(await conflict.catch((e: unknown) => e instanceof SemaphoreLimitConflictError));
        t.log(await backend.fairRelease(keys, 'a')); // handed to c
        await waitFor(() => t.heard.length === 1);
        t.log(await fair('c')); // already c's: granted anew, with a fence of its own
        t.log(await fair('e', false)); // d still queues: no place for a newcomer
        t.log(await backend.fairRelease(keys, 'd')); // leaves the queue, held nothing
        t.log(await backend.fairRelease(keys, 'b')); // nobody queues: freed, the token published
        t.log(await fair('x', false)); // a free place, nobody waiting
        t.log(await backend.fairRelease(keys, 'c'));
        t.log(await backend.fairRelease(keys, 'x'));
        t.log(await backend.isLocked(keys));
        await waitFor(() => t.heard.length === 4);
      },
      TWO,
    );
  });

  it('passes over a lapsed entry, hands a dead one a short lease, and keeps a lapse-freed place for the head', async () => {
    await onBoth(
      'fair-permits-lapse',
      async (backend, keys, t) => {
        const fair = (token: string, ttl = 5_000, lifetime = 1_000, queue = true) =>
          replyOf(t, backend.fairAcquire(keys, token, ttl, queue, lifetime), [0, 5_000]);
        t.log(await fair('a'));
        t.log(await fair('b', 100));
        t.log(await fair('y', 5_000, 50)); // queued, then never refreshed
        t.log(await fair('z')); // queued behind y
        await sleep(150); // y's entry lapsed; b's lease ended unreleased: a place free
        t.log(await fair('n', 5_000, 1_000, false)); // the free place is kept for z
        t.log(await fair('z')); // z takes it
        t.log(await fair('w', 5_000, 1_000)); // full again: w queues
        t.log(await backend.fairRelease(keys, 'a')); // handed to w
        t.log(await backend.extend(keys, 'w', 5_000)); // w holds it
        t.log(await backend.fairRelease(keys, 'w'));
        t.log(await backend.fairRelease(keys, 'z'));
        t.log(await backend.isLocked(keys));
        await waitFor(() => t.heard.length === 3);
      },
      TWO,
    );
  });

  it('keeps the places freed by lapsed leases for the live waiters, a newcomer refused, alike', async () => {
    await onBoth(
      'fair-permits-lapse-all',
      async (backend, keys, t) => {
        const fair = (token: string, ttl = 5_000, queue = true) =>
          replyOf(t, backend.fairAcquire(keys, token, ttl, queue, 5_000), [1, 5_000]);
        t.log(await fair('a', 100));
        t.log(await fair('b', 100));
        t.log(await fair('w1')); // full: queued
        t.log(await fair('w2')); // queued behind w1
        await lapsed(backend, keys); // both leases ran out: no release handed a place on
        const newcomer = await fair('n', 5_000, false);
        expect(newcomer).not.toHaveProperty('granted'); // both places kept for w1 and w2
        t.log(newcomer);
        t.log(await backend.isLocked(keys));
        const heads = [await fair('w1'), await fair('w2')];
        expect(heads.every((reply) => typeof reply === 'object' && 'granted' in reply!)).toBe(true);
        t.log(heads);
        t.log(await backend.fairRelease(keys, 'a')); // lapsed: not a's any more
        t.log(await backend.fairRelease(keys, 'w1'));
        t.log(await backend.fairRelease(keys, 'w2'));
        await waitFor(() => t.heard.length === 2);
        t.log(t.heard);
      },
      TWO,
    );
  });

  it('takes the limit from the first live waiter when no holder is left, for newcomers and hand-offs, alike', async () => {
    await onBoth(
      'fair-permits-limit',
      async (backend, keys, t) => {
        const three = new LockRedisKeys(keys.lock, { type: 'semaphore', permits: 3 });
        const fair = (token: string, on = keys, ttl = 5_000) =>
          replyOf(t, backend.fairAcquire(on, token, ttl, true, 2_000), [0, 5_000]);
        t.log(await fair('a', keys, 100));
        t.log(await fair('b', keys, 100));
        for (const waiter of ['w1', 'w2', 'w3']) t.log(await fair(waiter));
        await sleep(150); // both leases ended unreleased: no holder, no limit
        // No holder: the first live waiter's limit, 2, stands against a newcomer naming 3.
        t.log(
          await fair('x3', three).catch((e: unknown) => e instanceof SemaphoreLimitConflictError),
        );
        t.log(await backend.fairRelease(keys, 'nobody')); // w1's limit, 2: to w1 and w2
        t.log(await backend.fairRelease(keys, 'w1')); // to w3
        t.log(await backend.fairRelease(keys, 'w2')); // nobody left to hand to
        t.log(
          await fair('x3', three).catch((e: unknown) => e instanceof SemaphoreLimitConflictError),
        );
        t.log(await backend.fairRelease(keys, 'w3'));
        t.log(await backend.isLocked(keys));
        await waitFor(() => t.heard.length === 5);
      },
      TWO,
    );
  });
});

describe('inspection of every kind', () => {
  /** An inspection of every kind on the key, normalized: holders by id, times as ranges. */
  const inspectAll = async (
    backend: FairLockBackend,
    keys: LockRedisKeys,
    t: Transcript,
  ): Promise<unknown> => {
    const raw = await backend.inspectRaw(keys);
    const holders = (flat: (number | string | null)[] = []) => {
      const found: unknown[] = [];
      for (let i = 0; i < flat.length; i += 2) {
        const id = /^\d+ (.*)$/.exec(String(flat[i + 1]))?.[1] ?? null;
        found.push([t.pttl(Number(flat[i]), 1, 5_000), id]);
      }
      return found;
    };
    const ids = (flat: (string | null)[]) => flat.filter((_, i) => i % 2 === 1);
    return {
      exclusive: raw.token !== null,
      readers: holders(raw.readers),
      writersWaiting: raw.writersWaiting,
      semaphore: raw.semaphore && {
        limit: raw.semaphore.limit,
        fence: raw.semaphore.fence === 0 ? 0 : t.fence(raw.semaphore.fence),
        permits: holders(raw.semaphore.permits),
        waiters: ids(raw.semaphore.waiters),
      },
      locked: await backend.isLocked(keys),
    };
  };
  const listedKinds = async (backend: FairLockBackend, keys: LockRedisKeys) => {
    const page = await backend.scan(shared.prefix, undefined, 1_000);
    const base = keys.kind.type === 'semaphore' ? keys.lock.replace(/:permits$/, '') : keys.lock;
    return page.names
      .filter((name) => name.startsWith(base))
      .map((name) => name.slice(base.length));
  };
  const evicted = async (backend: FairLockBackend, keys: LockRedisKeys, t: Transcript) => {
    const removed = await backend.evict(keys);
    return (
      removed && {
        kind: removed.kind,
        fence: t.fence(removed.fence),
        count: removed.count,
        holders: removed.holders?.map((holder) => holder.instanceId),
        removed: Object.entries(removed.removed).map(([kind, each]: [string, EvictedKind]) => [
          kind,
          t.fence(each.fence),
          each.count,
          each.holders.map((holder) => holder.instanceId),
        ]),
      }
    );
  };

  it('reads and removes readers alike, their holder records and the writers waiting included', async () => {
    await onBoth('inspect-readers', async (backend, keys, t) => {
      const reader = new LockRedisKeys(keys.lock, { type: 'read' });
      t.log(await inspectAll(backend, keys, t));
      t.log(t.fence(await backend.acquire(reader, 'r1', 2_000)));
      t.log(t.fence(await backend.acquire(reader, 'r2', 3_000)));
      const writer = { waitingWriter: { id: 'w1', entryMs: 3_000, entered: () => undefined } };
      await backend.acquire(keys, 'w1', 2_000, writer);
      t.log(await inspectAll(backend, keys, t));
      t.log(await listedKinds(backend, keys));
      t.log(await backend.release(reader, 'r1'));
      t.log(await inspectAll(backend, keys, t));
      t.log(await evicted(backend, keys, t));
      t.log(await inspectAll(backend, keys, t));
      t.log(await evicted(backend, keys, t));
      t.log(await backend.extend(reader, 'r2', 2_000)); // its share is gone: lost
      await waitFor(() => t.heard.length === 1);
      t.log(t.heard);
    });
  });

  it('removes a mutex and permits on one key alike, and reports both', async () => {
    await onBoth('evict-both', async (backend, keys, t) => {
      const { semaphore } = kindKeysOf(keys.lock);
      const permits = new LockRedisKeys(semaphore.lock, { type: 'semaphore', permits: 5 });
      const mutexFence = await backend.acquire(keys, 'm', 2_000);
      let permitFence = 0;
      for (const token of ['p1', 'p2', 'p3']) {
        permitFence = await backend.acquire(permits, token, 2_000);
      }
      t.log(await inspectAll(backend, semaphore, t));
      // Asked by the semaphore's name: the mutex goes too, and both are reported.
      const removed = await backend.evict(semaphore);
      t.log(removed && [removed.kind, removed.count, removed.holder?.instanceId]);
      t.log(removed?.removed.exclusive?.fence === mutexFence);
      t.log(removed?.removed.semaphore?.fence === permitFence);
      t.log(removed?.removed.exclusive?.holders.map((holder) => holder.instanceId));
      t.log(removed?.removed.semaphore?.holders.map((holder) => holder.instanceId));
      t.log(removed?.removed.semaphore?.count);
      t.log(await inspectAll(backend, keys, t));
      t.log(await evicted(backend, keys, t));
    });
  });

  it('reads and removes permits alike, a fair hand-off writing the waiter as the new holder', async () => {
    await onBoth(
      'inspect-permits',
      async (backend, keys, t) => {
        const fair = (token: string) => backend.fairAcquire(keys, token, 3_000, true, 2_000);
        t.log(await inspectAll(backend, keys, t));
        t.log('granted' in (await fair('a')));
        t.log('granted' in (await fair('b')));
        t.log('retryAfterMs' in (await fair('c')));
        t.log(await inspectAll(backend, keys, t));
        t.log(await listedKinds(backend, keys));
        t.log(await backend.fairRelease(keys, 'a')); // handed to c
        t.log(await inspectAll(backend, keys, t));
        t.log(await evicted(backend, keys, t));
        t.log(await inspectAll(backend, keys, t));
        t.log(await backend.extend(keys, 'b', 2_000)); // gone: lost at the next renewal
        t.log(await listedKinds(backend, keys));
        await waitFor(() => t.heard.length === 3);
        t.log(t.heard.slice(1));
      },
      { type: 'semaphore', permits: 2 },
    );
  });
});
