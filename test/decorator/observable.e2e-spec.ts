/**
 * Observable-returning `@Locked` methods (routes on Express and Fastify, providers): the lock is
 * held from subscribe until complete, error or unsubscribe, and a lock granted after the
 * subscriber left is released. SSE routes are in `http-routes.e2e-spec.ts`.
 */
import { Controller, Get, Injectable, Param, type INestApplication } from '@nestjs/common';
import type Redis from 'ioredis';
import { defer, map, Observable, Subject, throwError, timer } from 'rxjs';
import request from 'supertest';
import { LockService, Locked } from 'nestjs-redis-lock';
import { deleteKeys, redisClient } from '../support/shared-redis';
import { sleep, waitFor } from '../support/time';
import { uniquePrefix } from '../support/unique-prefix';
import { createDecoratorApp } from './decorator-app';

const prefix = uniquePrefix('decorator-observable');

@Controller('streams')
class StreamsController {
  /** The open `finite` streams by id: the test emits and completes them. */
  readonly finiteStreams = new Map<string, Subject<string>>();

  @Get('finite/:id')
  @Locked('finite:<id>')
  finite(@Param('id') id: string): Observable<string> {
    // Ends when the test completes it; Nest answers with the last value.
    const stream = new Subject<string>();
    this.finiteStreams.set(id, stream);
    return stream;
  }

  @Get('failing/:id')
  @Locked('failing:<id>')
  failing(@Param('id') id: string): Observable<never> {
    void id;
    return timer(50).pipe(
      map(() => {
        throw new Error('stream broke');
      }),
    );
  }
}

@Injectable()
class FeedService {
  /** The source of each subscribed feed, by id: the test emits and completes it. */
  readonly sources = new Map<string, Subject<number>>();

  @Locked('feed:<id>')
  feed(id: string): Observable<number> {
    // Created on subscribe, which is after the lock was granted.
    return defer(() => {
      const source = new Subject<number>();
      this.sources.set(id, source);
      return source;
    });
  }

  @Locked('feed-error:<id>')
  broken(id: string): Observable<number> {
    void id;
    return throwError(() => new Error('feed broke'));
  }
}

describe.each([
  ['express', false],
  ['fastify', true],
] as const)('@Locked on Observable-returning routes (%s)', (platform, fastify) => {
  const routePrefix = `${prefix}${platform}:`;
  let app: INestApplication;
  let locks: LockService;
  let streams: StreamsController;
  let redis: Redis;

  beforeAll(async () => {
    redis = redisClient();
    app = await createDecoratorApp({
      prefix: routePrefix,
      controllers: [StreamsController],
      listen: true,
      fastify,
    });
    locks = app.get(LockService);
    streams = app.get(StreamsController);
  });

  afterAll(async () => {
    await app?.close();
    await deleteKeys(redis, routePrefix);
    await redis.quit();
  });

  it('holds the key until the Observable completes', async () => {
    const response = request(app.getHttpServer()).get('/streams/finite/1').then();
    // The handler builds its stream right after the lock is granted: wait for both.
    await waitFor(
      async () => streams.finiteStreams.has('1') && (await locks.isLocked('finite:1')),
      2_000,
      5,
    );
    const stream = streams.finiteStreams.get('1')!;
    // A second request meanwhile is busy, and values alone do not end the hold.
    const busy = await request(app.getHttpServer()).get('/streams/finite/1');
    expect(busy.status).toBe(409);
    for (const n of [0, 1, 2]) stream.next(`1-${n}`);
    await sleep(50);
    expect(await locks.isLocked('finite:1')).toBe(true);

    stream.complete();
    const done = await response;
    expect(done.status).toBe(200);
    expect(done.text).toBe('1-2');
    expect(await locks.isLocked('finite:1')).toBe(false);
  });

  it('releases the key when the Observable errors, and the error passes through', async () => {
    const response = await request(app.getHttpServer()).get('/streams/failing/1');
    expect(response.status).toBe(500);
    expect(await locks.isLocked('failing:1')).toBe(false);
  });
});

describe('@Locked on Observable-returning provider methods', () => {
  let app: INestApplication;
  let locks: LockService;
  let feeds: FeedService;
  let redis: Redis;

  beforeAll(async () => {
    redis = redisClient();
    app = await createDecoratorApp({ prefix, providers: [FeedService] });
    locks = app.get(LockService);
    feeds = app.get(FeedService);
  });

  afterAll(async () => {
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('acquires on subscribe, not on call, and holds until complete', async () => {
    const feed = feeds.feed('abc');
    await sleep(30);
    expect(await locks.isLocked('feed:abc')).toBe(false);

    const values: number[] = [];
    const completed = new Promise<void>((resolve, reject) =>
      feed.subscribe({ next: (n) => values.push(n), complete: resolve, error: reject }),
    );
    await waitFor(() => feeds.sources.has('abc'), 2_000, 5);
    expect(await locks.isLocked('feed:abc')).toBe(true);
    const source = feeds.sources.get('abc')!;
    for (const n of [3, 4, 5, 6]) source.next(n);
    expect(await locks.isLocked('feed:abc')).toBe(true);
    source.complete();
    await completed;
    expect(values).toEqual([3, 4, 5, 6]);
    expect(await locks.isLocked('feed:abc')).toBe(false);
  });

  it('releases when the subscriber unsubscribes', async () => {
    const subscription = feeds.feed('u').subscribe();
    await waitFor(() => locks.isLocked('feed:u'), 2_000, 5);
    subscription.unsubscribe();
    await waitFor(async () => !(await locks.isLocked('feed:u')), 2_000, 5);
  });

  it('releases at once a lock granted after the subscriber left', async () => {
    for (let i = 0; i < 5; i++) {
      // Unsubscribe while the acquire is still on its way to Redis.
      feeds.feed(`late-${i}`).subscribe().unsubscribe();
    }
    await sleep(100);
    for (let i = 0; i < 5; i++) {
      // Redis did grant it (the fence counter moved), and the grant was released.
      expect(await redis.exists(`${prefix}{feed:late-${i}}:fence`)).toBe(1);
      expect(await locks.isLocked(`feed:late-${i}`)).toBe(false);
    }
  });

  it('releases when the source errors, and the error reaches the subscriber', async () => {
    const failed = new Promise<unknown>((resolve) =>
      feeds.broken('x').subscribe({ error: resolve }),
    );
    await expect(failed).resolves.toThrow('feed broke');
    expect(await locks.isLocked('feed-error:x')).toBe(false);
  });

  it('a second subscriber meanwhile is busy', async () => {
    const first = feeds.feed('busy').subscribe(); // held until unsubscribed
    await waitFor(() => locks.isLocked('feed:busy'), 2_000, 5);
    const second = new Promise<unknown>((resolve) =>
      feeds.feed('busy').subscribe({ error: resolve }),
    );
    await expect(second).resolves.toMatchObject({ name: 'LockNotAcquiredError' });
    first.unsubscribe();
  });
});
