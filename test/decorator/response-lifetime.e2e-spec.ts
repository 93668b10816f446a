/**
 * How long a `@Locked` route holds its key, through real Express and Fastify servers (every route
 * test runs on both): until the work for the key is done — a Promise handler's promise settled (even after a timeout interceptor gave up), a
 * `@Res()` handler's response sent, a `StreamableFile` or piped stream ended — not until the
 * handler returned. Each test counts concurrent runs per key; the controls run the same handlers
 * under a lock released on return and show the overlap.
 */
import {
  type CallHandler,
  Controller,
  type ExecutionContext,
  Get,
  Injectable,
  type INestApplication,
  type NestInterceptor,
  type PipeTransform,
  Param,
  Post,
  Res,
  SetMetadata,
  StreamableFile,
  UseInterceptors,
} from '@nestjs/common';
import { APP_INTERCEPTOR, Reflector } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import type Redis from 'ioredis';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { map, Observable, race, timer } from 'rxjs';
import request from 'supertest';
import { currentLock, LockService, Locked, RedisLockModule } from 'nestjs-redis-lock';
import { deleteKeys, redisClient, SHARED_REDIS_URL } from '../support/shared-redis';
import { sleep, waitFor } from '../support/time';
import { uniquePrefix } from '../support/unique-prefix';
import { createDecoratorApp } from './decorator-app';
import {
  ConcurrentRuns,
  ReleaseOnReturnInterceptor,
  TIMEOUT_MS,
  TimeoutInterceptor,
} from './concurrent-runs';

const runs = new ConcurrentRuns();

/**
 * What the `@Res()` handlers below use of the response: calls Express's `Response` and Fastify's
 * `FastifyReply` both have, with the same meaning (`send` of an object answers JSON).
 */
interface Reply {
  status(code: number): Reply;
  header(name: string, value: string): unknown;
  send(body: unknown): unknown;
}

/**
 * How a handler streams a body into the response it holds. Express's `Response` is a writable
 * stream to pipe into; Fastify's reply is not, and takes the stream to send instead.
 */
type StreamInto = (stream: Readable, reply: Reply) => void;

const PLATFORMS: [string, { fastify: boolean; streamInto: StreamInto }][] = [
  [
    'express',
    {
      fastify: false,
      streamInto: (stream, res) => void stream.pipe(res as unknown as NodeJS.WritableStream),
    },
  ],
  ['fastify', { fastify: true, streamInto: (stream, reply) => void reply.send(stream) }],
];

/** The platform the app under test serves on: the piped route reads how to stream from it. */
let streamInto: StreamInto = () => undefined;

const RACE_MS = 'test:race-ms';

/** An outer `race`: whichever answers first wins, the loser is unsubscribed. */
@Injectable()
class RaceInterceptor implements NestInterceptor {
  constructor(private readonly reflector: Reflector) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const ms = this.reflector.get<number | undefined>(RACE_MS, context.getHandler());
    if (!ms) return next.handle();
    return race(next.handle(), timer(ms).pipe(map(() => ({ queued: true }))));
  }
}

/** A stream the test ends: counted as one run from creation until it ends or closes. */
function countedStream(key: string): Readable {
  runs.enter(key);
  const stream = new Readable({ read: () => undefined });
  let left = false;
  const leave = (): void => {
    if (!left) runs.leave(key);
    left = true;
  };
  stream.once('end', leave).once('close', leave);
  void runs.gate(key).then(() => stream.push(null));
  stream.push('first chunk;');
  return stream;
}

/** A pipe that takes its time (an async validation): it waits for the key's gate. */
@Injectable()
class SlowPipe implements PipeTransform<string, Promise<string>> {
  async transform(userId: string): Promise<string> {
    await runs.gate(`pipe:${userId}`);
    return userId;
  }
}

@Injectable()
class Ticker {
  readonly seen: { signal?: AbortSignal; heldAtTeardown?: boolean } = {};

  @Locked('tick:<id>')
  ticks(id: string): Observable<string> {
    return new Observable<string>((subscriber) => {
      const lock = currentLock()!;
      this.seen.signal = lock.signal;
      const every = setInterval(() => subscriber.next(id), 10);
      return () => {
        clearInterval(every);
        this.seen.heldAtTeardown = lock.isHeld;
      };
    });
  }
}

@Controller()
class LifetimeController {
  @Post('slow/:userId')
  @SetMetadata(TIMEOUT_MS, 500)
  @Locked('slow:<userId>', { ttl: 600 })
  slow(@Param('userId') userId: string): Promise<{ done: string }> {
    return runs.work(`slow:${userId}`);
  }

  @Post('control/slow/:userId')
  @SetMetadata(TIMEOUT_MS, 500)
  @UseInterceptors(ReleaseOnReturnInterceptor)
  controlSlow(@Param('userId') userId: string): Promise<{ done: string }> {
    return runs.work(`control:${userId}`);
  }

  @Post('raced/:userId')
  @SetMetadata(RACE_MS, 300)
  @Locked('raced:<userId>')
  raced(@Param('userId') userId: string): Promise<{ done: string }> {
    return runs.work(`raced:${userId}`);
  }

  @Post('slow-pipe/:userId')
  @SetMetadata(TIMEOUT_MS, 300)
  @Locked('pipe:<userId>')
  async slowPipe(@Param('userId', SlowPipe) userId: string): Promise<{ ran: string }> {
    runs.enter(`pipe:${userId}`);
    runs.leave(`pipe:${userId}`);
    return { ran: userId };
  }

  @Post('passthrough/:userId')
  @Locked('passthrough:<userId>')
  async passthrough(@Param('userId') userId: string, @Res({ passthrough: true }) res: Reply) {
    res.header('x-seen', userId);
    return { userId };
  }

  /** Replies later, from a callback: the handler itself returns at once. */
  @Post('res/:userId')
  @Locked('res:<userId>')
  async replyLater(@Param('userId') userId: string, @Res() res: Reply): Promise<void> {
    void runs.work(`res:${userId}`).then((body) => res.status(201).send(body));
  }

  /** Takes the response and never answers: only the client leaving ends the call. */
  @Post('never/:userId')
  @Locked('never:<userId>')
  async neverAnswers(@Param('userId') userId: string, @Res() res: Reply): Promise<void> {
    void res;
    runs.enter(`never:${userId}`);
  }

  @Post('control/res/:userId')
  @UseInterceptors(ReleaseOnReturnInterceptor)
  controlReplyLater(@Param('userId') userId: string, @Res() res: Reply): void {
    void runs.work(`control:${userId}`).then((body) => res.status(201).send(body));
  }

  @Get('file/:id')
  @Locked('file:<id>')
  async file(@Param('id') id: string): Promise<StreamableFile> {
    return new StreamableFile(countedStream(`file:${id}`));
  }

  @Get('piped/:id')
  @Locked('piped:<id>')
  async piped(@Param('id') id: string, @Res() res: Reply): Promise<void> {
    res.header('content-type', 'text/plain');
    streamInto(countedStream(`piped:${id}`), res);
  }

  @Get('skip-res/:id')
  @Locked('skip-res:<id>', { onBusy: 'skip' })
  async skipRes(@Param('id') id: string, @Res() res: Reply): Promise<void> {
    void res.status(200).send({ ran: id });
  }
}

/** Opens a GET whose body streams; resolves once its first chunk arrived. */
function openStream(
  port: number,
  path: string,
): Promise<{ status: number; body: Promise<string>; abort: () => void }> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path });
    req.on('response', (res) => {
      let text = '';
      const body = new Promise<string>((done, failed) => {
        res.on('end', () => done(text));
        res.on('error', failed);
      });
      body.catch(() => undefined);
      res.on('data', (chunk: Buffer) => {
        const first = text === '';
        text += chunk.toString();
        if (first) resolve({ status: res.statusCode!, body, abort: () => req.destroy() });
      });
    });
    req.on('error', reject);
  });
}

describe.each(PLATFORMS)(
  '@Locked routes hold the key until the work for it is done (%s)',
  (platform, options) => {
    const prefix = uniquePrefix(`response-lifetime-${platform}`);
    let app: INestApplication;
    let locks: LockService;
    let redis: Redis;
    let port: number;

    beforeAll(async () => {
      redis = redisClient();
      const moduleRef = await Test.createTestingModule({
        imports: [RedisLockModule.forRoot({ redis: SHARED_REDIS_URL, prefix })],
        controllers: [LifetimeController],
        providers: [
          { provide: APP_INTERCEPTOR, useClass: TimeoutInterceptor },
          { provide: APP_INTERCEPTOR, useClass: RaceInterceptor },
          ReleaseOnReturnInterceptor,
        ],
      }).compile();
      app = options.fastify
        ? moduleRef.createNestApplication(new FastifyAdapter(), { logger: false })
        : moduleRef.createNestApplication({ logger: false });
      streamInto = options.streamInto;
      runs.reset(); // the same keys as on the platform before
      await app.listen(0, '127.0.0.1');
      locks = app.get(LockService);
      port = (app.getHttpServer().address() as AddressInfo).port;
    });

    afterEach(() => runs.openAll());

    afterAll(async () => {
      runs.openAll();
      await app?.close();
      await deleteKeys(redis, prefix);
      await redis.quit();
    });

    const post = (path: string) => request(app.getHttpServer()).post(path).then();
    const released = (key: string) => waitFor(async () => !(await locks.isLocked(key)), 2_000, 5);

    /** A second request for a key whose first run still goes on: its status, or 'ran' (overlap). */
    const secondCall = (key: string, call: () => Promise<{ status: number }>) =>
      runs.answeredOrRan(key, () => call().then((response) => response.status));

    describe('a Promise handler after a timeout interceptor gave up', () => {
      it('CONTROL: a lock released on return lets a second request run beside the first', async () => {
        const key = 'control:t-1';
        expect((await post('/control/slow/t-1')).status).toBe(408);
        expect(runs.started(key)).toBe(1);
        const outcome = await secondCall(key, () => post('/control/slow/t-1'));
        expect(outcome).toBe('ran');
        expect(runs.maxConcurrent(key)).toBe(2);
      });

      it('holds the key, and renews it past its lease, until the promise settles', async () => {
        const key = 'slow:u-1';
        expect((await post('/slow/u-1')).status).toBe(408);
        expect(runs.started(key)).toBe(1);
        // The handler still runs: the key stays held past its 600 ms lease (renewed), and a second
        // request for the same user is refused instead of running beside it.
        await sleep(700);
        const outcome = await secondCall(key, () => post('/slow/u-1'));
        expect(outcome).toBe(409);
        expect(await locks.isLocked(key)).toBe(true);

        runs.open(key);
        await released(key);
        expect(runs.maxConcurrent(key)).toBe(1);
        expect((await post('/slow/u-1')).status).toBe(408); // free again: this one runs (and waits)
        expect(runs.started(key)).toBe(2);
      });

      it('holds the key after an outer race() left for its other branch', async () => {
        const key = 'raced:u-2';
        expect((await post('/raced/u-2')).body).toEqual({ queued: true });
        expect(runs.started(key)).toBe(1);
        const outcome = await secondCall(key, () => post('/raced/u-2'));
        expect(outcome).toBe(409);
        runs.open(key);
        await released(key);
        expect(runs.maxConcurrent(key)).toBe(1);
      });
    });

    it('does not run a handler whose caller left (timeout) while its pipes ran: the lock is gone', async () => {
      const key = 'pipe:u-9';
      expect((await post('/slow-pipe/u-9')).status).toBe(408);
      await released(key); // nothing of the handler runs yet: the key is free at once
      runs.open(key); // the pipe finishes now, after the release
      await sleep(100);
      expect(runs.started(key)).toBe(0);
    });

    describe('a @Res() handler that replies later', () => {
      it('CONTROL: a lock released on return lets a second request run beside the first', async () => {
        const key = 'control:r-1';
        const first = post('/control/res/r-1');
        await waitFor(() => runs.started(key) === 1, 3_000, 5);
        const outcome = await secondCall(key, () => post('/control/res/r-1'));
        expect(outcome).toBe('ran');
        expect(runs.maxConcurrent(key)).toBe(2);
        runs.open(key);
        expect((await first).status).toBe(201);
      });

      it('holds the key until the response is sent, then releases it', async () => {
        const key = 'res:u-3';
        const first = post('/res/u-3');
        await waitFor(() => runs.started(key) === 1, 3_000, 5);
        await sleep(50); // well past the handler's return
        const outcome = await secondCall(key, () => post('/res/u-3'));
        expect(outcome).toBe(409);

        runs.open(key);
        const answer = await first;
        expect(answer.status).toBe(201);
        expect(answer.body).toEqual({ done: key });
        await released(key);
        expect(runs.maxConcurrent(key)).toBe(1);
      });
    });

    it('releases the key of a @Res() handler that never answers when the client disconnects', async () => {
      const key = 'never:u-5';
      const req = http.request({ host: '127.0.0.1', port, path: '/never/u-5', method: 'POST' });
      req.on('error', () => undefined);
      req.end();
      await waitFor(() => runs.started(key) === 1, 3_000, 5);
      expect(await locks.isLocked(key)).toBe(true);
      req.destroy();
      await released(key);
    });

    it('@Res({ passthrough: true }): Nest sends the return value, and the key is released', async () => {
      const answer = await post('/passthrough/u-4');
      expect(answer.status).toBe(201);
      expect(answer.body).toEqual({ userId: 'u-4' });
      expect(answer.headers['x-seen']).toBe('u-4');
      await released('passthrough:u-4');
    });

    describe('streams', () => {
      it('holds the key of a StreamableFile until its stream ended', async () => {
        const key = 'file:f-1';
        const first = await openStream(port, '/file/f-1');
        expect(first.status).toBe(200);
        const outcome = await secondCall(key, () =>
          request(app.getHttpServer()).get('/file/f-1').then(),
        );
        expect(outcome).toBe(409);
        expect(await locks.isLocked(key)).toBe(true);

        runs.open(key);
        expect(await first.body).toBe('first chunk;');
        await released(key);
        expect(runs.maxConcurrent(key)).toBe(1);
      });

      it('releases the key of a StreamableFile when the client disconnects', async () => {
        const key = 'file:f-2';
        const first = await openStream(port, '/file/f-2');
        expect(await locks.isLocked(key)).toBe(true);
        first.abort();
        await released(key);
      });

      it('holds the key of a stream piped into @Res() until it ended', async () => {
        const key = 'piped:p-1';
        const first = await openStream(port, '/piped/p-1');
        const outcome = await secondCall(key, () =>
          request(app.getHttpServer()).get('/piped/p-1').then(),
        );
        expect(outcome).toBe(409);

        runs.open(key);
        expect(await first.body).toBe('first chunk;');
        await released(key);
        expect(runs.maxConcurrent(key)).toBe(1);
      });
    });

    describe("onBusy: 'skip'", () => {
      it('answers a skipped @Res() route with 204 instead of leaving the client hanging', async () => {
        const holder = await locks.acquire('skip-res:s-1');
        try {
          const skipped = await request(app.getHttpServer()).get('/skip-res/s-1').timeout(3_000);
          expect(skipped.status).toBe(204);
          expect(skipped.text).toBe('');
        } finally {
          await holder.release();
        }
        const ran = await request(app.getHttpServer()).get('/skip-res/s-1').timeout(3_000);
        expect(ran.status).toBe(200);
        expect(ran.body).toEqual({ ran: 's-1' });
      });
    });
  },
);

describe('an Observable from a @Locked provider', () => {
  const prefix = uniquePrefix('response-lifetime-observable');
  let app: INestApplication;
  let locks: LockService;
  let redis: Redis;

  beforeAll(async () => {
    redis = redisClient();
    app = await createDecoratorApp({ prefix, providers: [Ticker] });
    locks = app.get(LockService);
  });

  afterAll(async () => {
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  const released = (key: string) => waitFor(async () => !(await locks.isLocked(key)), 2_000, 5);

  it("aborts its lock's signal at teardown, and releases the key once teardown has run", async () => {
    const ticker = app.get(Ticker);
    const subscription = ticker.ticks('o-1').subscribe();
    await waitFor(() => ticker.seen.signal !== undefined, 3_000, 5);
    const signal = ticker.seen.signal!;
    expect(signal.aborted).toBe(false);

    subscription.unsubscribe();
    expect(ticker.seen.heldAtTeardown).toBe(true); // teardown ran before the release
    expect(signal.aborted).toBe(true); // work that checks the signal stops
    await released('tick:o-1');
  });
});
