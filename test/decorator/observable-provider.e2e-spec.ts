/**
 * `@Locked` provider methods that return an Observable the decorator cannot see at definition
 * time (`import type { Observable }`, or an inferred return type): the body runs under the lock,
 * the caller gets a Promise of the stream, and the stream holds the lock again from subscribe
 * until it completes, errors or is unsubscribed. An Observable nobody subscribes to holds nothing.
 */
import type { INestApplication } from '@nestjs/common';
import type Redis from 'ioredis';
import { isObservable, Observable } from 'rxjs';
import { LockService } from 'nestjs-redis-lock';
import { deleteKeys, redisClient } from '../support/shared-redis';
import { waitFor } from '../support/time';
import { uniquePrefix } from '../support/unique-prefix';
import { createDecoratorApp } from './decorator-app';
import { TypeOnlyFeeds } from './fixtures/type-only-observable.service';

const prefix = uniquePrefix('decorator-observable-provider');

describe('@Locked provider methods returning an Observable the decorator cannot see', () => {
  let app: INestApplication;
  let redis: Redis;
  let feeds: TypeOnlyFeeds;
  let locks: LockService;
  let other: LockService;

  beforeAll(async () => {
    redis = redisClient();
    app = await createDecoratorApp({ prefix, providers: [TypeOnlyFeeds] });
    feeds = app.get(TypeOnlyFeeds);
    locks = app.get(LockService);
    other = new LockService({ redis: locks.options.redis, prefix });
  });

  afterAll(async () => {
    await app?.close();
    await other?.close();
    await deleteKeys(redis, prefix);
    await redis?.quit();
  });

  it('the fixture really hides the return type from the decorator', () => {
    for (const method of ['typed', 'inferred']) {
      const type: unknown = Reflect.getMetadata(
        'design:returntype',
        TypeOnlyFeeds.prototype,
        method,
      );
      expect(type).not.toBe(Observable);
    }
  });

  describe.each(['typed', 'inferred'] as const)('%s return type', (method) => {
    // Both methods use the same ids: forget the other run's feeds, or a wait for this run's
    // subscription would find the other's (and its completed source) at once.
    beforeEach(() => {
      feeds.sources.clear();
      feeds.bodyLocked.clear();
      feeds.streamLocked.clear();
    });

    const key = (id: string): string => `${method}:${id}`;
    const call = (id: string): Promise<Observable<number>> =>
      (feeds[method] as (id: string) => unknown)(id) as Promise<Observable<number>>;

    it('runs the body and the stream under the lock, from subscribe until it completes', async () => {
      const stream = await call('a');
      expect(isObservable(stream)).toBe(true);
      expect(feeds.bodyLocked.get('a')).toBe(true);
      // Returned but not subscribed: the key is free.
      expect(await locks.isLocked(key('a'))).toBe(false);

      const values: number[] = [];
      const done = new Promise<void>((resolve, reject) =>
        stream.subscribe({ next: (n) => values.push(n), complete: resolve, error: reject }),
      );
      await waitFor(() => feeds.sources.has('a'), 2_000, 5);
      expect(feeds.streamLocked.get('a')).toBe(true);
      expect(await other.tryAcquire(key('a'))).toBeNull();

      const source = feeds.sources.get('a')!;
      source.next(1);
      source.next(2);
      expect(await other.tryAcquire(key('a'))).toBeNull();
      source.complete();
      await done;
      expect(values).toEqual([1, 2]);
      expect(await locks.isLocked(key('a'))).toBe(false);
    });

    it('releases when the subscriber unsubscribes', async () => {
      const stream = await call('b');
      const subscription = stream.subscribe();
      await waitFor(() => feeds.sources.has('b'), 2_000, 5);
      expect(await locks.isLocked(key('b'))).toBe(true);
      subscription.unsubscribe();
      await waitFor(async () => !(await locks.isLocked(key('b'))), 2_000, 5);
    });
  });
});
