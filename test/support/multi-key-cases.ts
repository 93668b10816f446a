import { LockLostError, type LockService } from 'nestjs-redis-lock';
import { sleep, waitFor } from './time';

/**
 * Multi-key cases every topology must pass (one Redis, a Cluster across slots, Redlock), written
 * once. Each takes the services to run on and the keys to use, and asserts with `expect`.
 */

/**
 * `calls` `withLock` calls at once, alternating `[a, b]` on `first` and `[b, a]` on `second`, each
 * holding both keys for `holdMs`: every call must succeed within `wait` (no deadlock), and no two
 * may run at the same time.
 */
export async function expectNoDeadlockBetweenOrders(
  [first, second]: readonly [LockService, LockService],
  [a, b]: readonly [string, string],
  { calls, holdMs = 2, wait = 15_000 }: { calls: number; holdMs?: number; wait?: number },
): Promise<void> {
  let inside = 0;
  let overlaps = 0;
  const run = (service: LockService, keys: string[]) =>
    service.withLock(
      keys,
      async () => {
        if (++inside > 1) overlaps++;
        await sleep(holdMs);
        inside--;
      },
      { wait },
    );
  const outcomes = await Promise.allSettled(
    Array.from({ length: calls }, (_, i) => (i % 2 ? run(first, [a, b]) : run(second, [b, a]))),
  );
  expect(outcomes.filter((outcome) => outcome.status === 'rejected')).toEqual([]);
  expect(overlaps).toBe(0);
}

/**
 * `holder` takes `[kept, lost]` on a short lease and `other` force-releases `lost`: the set's
 * signal must abort with `lost`'s `LockLostError`, and `kept` be freed without a release call.
 */
export async function expectOneKeyLostLosesTheSet(
  holder: LockService,
  other: LockService,
  [kept, lost]: readonly [string, string],
): Promise<void> {
  const lock = await holder.acquire([kept, lost], { ttl: 300 });
  expect(await other.forceRelease(lost)).toBe(true);
  await waitFor(() => lock.signal.aborted, 3_000);
  expect(lock.signal.reason).toBeInstanceOf(LockLostError);
  expect((lock.signal.reason as LockLostError).key).toBe(lost);
  await waitFor(async () => !(await other.isLocked(kept)), 3_000);
}
