/**
 * A locked Observable whose source emits on subscribe (`startWith`, a `BehaviorSubject`), left by
 * its consumer on that first value (`firstValueFrom`, `take(1)`): the consumer leaves while the
 * source is still being subscribed, and the source must still be unsubscribed — its timers and
 * work stop — and the lock released.
 */
import { Injectable, type INestApplication } from '@nestjs/common';
import { firstValueFrom, interval, Observable, startWith, take, tap } from 'rxjs';
import { Locked, LockService } from 'nestjs-redis-lock';
import { onSharedRedis } from '../support/lock-services';
import { sleep, waitFor } from '../support/time';
import { createDecoratorApp } from './decorator-app';

/** Source values seen, by stream name. */
const ticks = new Map<string, number>();
const tick = (name: string) => tap<number>(() => ticks.set(name, (ticks.get(name) ?? 0) + 1));

/** Emits at once on subscribe, then every 20 ms; ends by itself after ~0.8 s (no leak kept). */
const feed = (name: string): Observable<number> =>
  interval(20).pipe(startWith(-1), take(40), tick(name));

@Injectable()
class Feeds {
  @Locked('feed:<id>')
  stream(id: string): Observable<number> {
    return feed(`stream:${id}`);
  }

  /** Re-enters the stream's lock from a locked call on the same key. */
  @Locked('feed:<id>')
  async nested(id: string): Promise<number> {
    return firstValueFrom(this.stream(id));
  }

  /** The return type the decorator cannot see: the stream is locked again on subscribe. */
  @Locked('feed:<id>')
  async hidden(id: string) {
    return feed(`hidden:${id}`);
  }
}

const { prefix, redis, keyOf } = onSharedRedis('observable-sync-emission');
let app: INestApplication;
let feeds: Feeds;

beforeAll(async () => {
  app = await createDecoratorApp({ prefix, providers: [Feeds] });
  feeds = app.get(Feeds);
});
afterAll(() => app?.close());

/** Whether the source named `name` is still running: its tick count grows over `ms`. */
async function stillTicking(name: string, ms = 200): Promise<boolean> {
  const before = ticks.get(name) ?? 0;
  await sleep(ms);
  return (ticks.get(name) ?? 0) > before;
}

describe('a locked Observable left on a value emitted while subscribing', () => {
  it('unsubscribes its source and releases the lock', async () => {
    expect(await firstValueFrom(feeds.stream('a'))).toBe(-1);
    await waitFor(async () => (await redis.exists(keyOf('feed:a'))) === 0, 2_000);
    expect(await stillTicking('stream:a')).toBe(false);
  });

  it('unsubscribes its source when it re-entered a lock its caller holds', async () => {
    expect(await feeds.nested('b')).toBe(-1);
    await waitFor(async () => (await redis.exists(keyOf('feed:b'))) === 0, 2_000);
    expect(await stillTicking('stream:b')).toBe(false);
  });

  it('unsubscribes its source when the decorator could not see the Observable type', async () => {
    expect(await firstValueFrom(await feeds.hidden('c'))).toBe(-1);
    await waitFor(async () => (await redis.exists(keyOf('feed:c'))) === 0, 2_000);
    expect(await stillTicking('hidden:c')).toBe(false);
    expect(await app.get(LockService).isLocked('feed:c')).toBe(false);
  });
});
