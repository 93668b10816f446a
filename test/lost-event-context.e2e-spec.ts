/**
 * 'lost' listeners run in a neutral async context: not in the context of whichever call happened
 * to arm the watchdog's timer, so `currentLock()` and request-scoped stores (a request logger)
 * in a listener never name an unrelated request.
 */
import { Logger } from '@nestjs/common';
import { AsyncLocalStorage } from 'node:async_hooks';
import { currentLock, type LockHandle } from 'nestjs-redis-lock';
import { hostProcess } from './support/host-process';
import { onSharedRedis } from './support/lock-services';
import { Gate, sleep, waitFor } from './support/time';

const { services, redis, keyOf } = onSharedRedis('lost-event-context');

/** What a request-scoped logger reads: the request the running code belongs to. */
const requestScope = new AsyncLocalStorage<{ requestId: string }>();

interface Seen {
  lost: string;
  currentLock: string | undefined;
  requestId: string | undefined;
}

it("runs 'lost' listeners outside the context of the request that armed the watchdog", async () => {
  const requests = services.create();
  const jobs = services.create({ ttl: 600 }); // a fresh watchdog: its first acquire arms its timer
  const seen: Seen[] = [];
  jobs.on('lost', (_error, lock) =>
    seen.push({
      lost: lock.key,
      currentLock: currentLock()?.key,
      requestId: requestScope.getStore()?.requestId,
    }),
  );

  // Request A holds its lock and takes a job lock inside it: the watchdog's timer is armed there.
  const gate = new Gate();
  let jobOfA: LockHandle | undefined;
  const requestA = requestScope.run({ requestId: 'A' }, () =>
    requests.withLock('request-a', async () => {
      jobOfA = await jobs.acquire('job-of-a');
      await gate.opened;
      await jobOfA.release();
    }),
  );
  await waitFor(() => jobOfA !== undefined);

  // Request B's lock is lost while A still runs.
  const jobOfB = await requestScope.run({ requestId: 'B' }, () => jobs.acquire('job-of-b'));
  await redis.del(keyOf('job-of-b'));
  await waitFor(() => seen.length > 0, 5_000);
  gate.release();
  await requestA;

  expect(seen).toEqual([{ lost: 'job-of-b', currentLock: undefined, requestId: undefined }]);
  expect(await jobOfB.release()).toBe(false);
});

it("aborts a lost lock's signal outside the context of the request that armed the watchdog", async () => {
  const requests = services.create();
  const jobs = services.create({ ttl: 600 }); // a fresh watchdog: its first acquire arms its timer
  const seen: Omit<Seen, 'lost'>[] = [];

  const gate = new Gate();
  let jobOfA: LockHandle | undefined;
  const requestA = requestScope.run({ requestId: 'A' }, () =>
    requests.withLock('signal-request-a', async () => {
      jobOfA = await jobs.acquire('signal-job-of-a');
      await gate.opened;
      await jobOfA.release();
    }),
  );
  await waitFor(() => jobOfA !== undefined);

  const jobOfB = await requestScope.run({ requestId: 'B' }, () => jobs.acquire('signal-job-of-b'));
  jobOfB.signal.addEventListener('abort', () =>
    seen.push({ currentLock: currentLock()?.key, requestId: requestScope.getStore()?.requestId }),
  );
  await redis.del(keyOf('signal-job-of-b'));
  await waitFor(() => seen.length > 0, 5_000);
  gate.release();
  await requestA;

  expect(seen).toEqual([{ currentLock: undefined, requestId: undefined }]);
});

it("logs an async 'lost' listener's rejection like a throwing listener's error, never leaving it unhandled", async () => {
  const unhandled: unknown[] = [];
  const record = (reason: unknown): void => void unhandled.push(reason);
  hostProcess.on('unhandledRejection', record);
  const logged = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
  try {
    const locks = services.create({ ttl: 300 });
    const calls: string[] = [];
    locks.on('lost', async () => {
      await Promise.resolve();
      throw new Error('metrics backend down');
    });
    locks.on('lost', () => {
      calls.push('sync throw');
      throw new Error('sync listener failed');
    });
    locks.on('lost', (error) => void calls.push(`after: ${error.reason}`)); // still called
    const lock = await locks.acquire('async-listener');
    await redis.del(keyOf('async-listener')); // the next renewal finds it gone
    await waitFor(() => lock.signal.aborted, 2_000);
    await waitFor(() => logged.mock.calls.length >= 2, 1_000);
    await sleep(20); // a rejection nobody handled is reported after a turn of the event loop
    expect(unhandled.map(String)).toEqual([]);
    expect(calls).toEqual(['sync throw', 'after: not-owner']);
    const messages = logged.mock.calls.map(([message]) => String(message));
    expect(messages).toEqual(
      expect.arrayContaining([
        expect.stringContaining('metrics backend down'),
        expect.stringContaining('sync listener failed'),
      ]),
    );
  } finally {
    logged.mockRestore();
    hostProcess.off('unhandledRejection', record);
  }
});
