/**
 * `@Locked` routes that Nest calls without `LockedInterceptor` (every test on Express and on
 * Fastify): such a route answers a busy lock exactly as its intercepted twin does (409, body,
 * `Retry-After`, the log line naming the handler), keys from its piped arguments, and holds a
 * `StreamableFile`'s key until the file was read or its client left. Routes whose call without the
 * interceptor could differ keep it: a key read from the request, another interceptor of the app, a
 * filter of the user's that catches the interceptor's `HttpException`, `answerLockErrors: false`,
 * an `exceptionFactory` — also after another app in the process took the interceptor away, and in
 * an app started while one that needs it runs.
 */
import {
  type ArgumentsHost,
  type CallHandler,
  Catch,
  Controller,
  type ExceptionFilter,
  type ExecutionContext,
  Get,
  HttpException,
  Injectable,
  type INestApplication,
  Logger,
  type NestInterceptor,
  Param,
  ParseIntPipe,
  type Provider,
  StreamableFile,
  UseInterceptors,
} from '@nestjs/common';
import { APP_FILTER, APP_INTERCEPTOR } from '@nestjs/core';
import type Redis from 'ioredis';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import request from 'supertest';
import {
  currentLock,
  Locked,
  LockedInterceptor,
  LockService,
  type RedisLockModuleOptions,
} from 'nestjs-redis-lock';
import { deleteKeys, redisClient } from '../support/shared-redis';
import { sleep, waitFor } from '../support/time';
import { uniquePrefix } from '../support/unique-prefix';
import { ConcurrentRuns } from './concurrent-runs';
import { createDecoratorApp } from './decorator-app';

/** Nest's metadata key of a method's interceptors (`@nestjs/common` constants). */
const INTERCEPTORS_METADATA = '__interceptors__';

const runs = new ConcurrentRuns();

/** An interceptor that does nothing: a route with it keeps `LockedInterceptor` (the twin). */
@Injectable()
class PassThrough implements NestInterceptor {
  intercept(_context: ExecutionContext, next: CallHandler) {
    return next.handle();
  }
}

/** A user's filter for every HttpException: it wraps the body in an envelope of its own. */
@Catch(HttpException)
class Envelope implements ExceptionFilter {
  catch(exception: HttpException, host: ArgumentsHost): void {
    // Express's `res.status()` and Fastify's `reply.status()` both answer JSON for an object.
    const response = host
      .switchToHttp()
      .getResponse<{ status(code: number): { send(body: unknown): unknown } }>();
    response.status(exception.getStatus()).send({ envelope: { status: exception.getStatus() } });
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

@Controller('direct')
class DirectController {
  @Get('busy/:id')
  @Locked('busy:<id>')
  async busy(@Param('id') id: string) {
    return { id };
  }

  /** The same lock behind an interceptor of its own: it keeps `LockedInterceptor`. */
  @Get('busy-intercepted/:id')
  @UseInterceptors(PassThrough)
  @Locked('busy:<id>')
  async busyIntercepted(@Param('id') id: string) {
    return { id };
  }

  @Get('number/:id')
  @Locked('n:<id>')
  async byNumber(@Param('id', ParseIntPipe) id: number) {
    return { key: currentLock()?.key, id };
  }

  @Get('file/:id')
  @Locked('file:<id>')
  async file(@Param('id') id: string): Promise<StreamableFile> {
    return new StreamableFile(countedStream(`file:${id}`));
  }

  /** Resolves to its file only when the test opens `late:<id>`: its client may have left by then. */
  @Get('late-file/:id')
  @Locked('late-file:<id>')
  async lateFile(@Param('id') id: string): Promise<StreamableFile> {
    await runs.gate(`late:${id}`);
    return new StreamableFile(countedStream(`late-file:${id}`));
  }

  /** Keyed from a header no parameter supplies: only the interceptor sees the request. */
  @Get('tenant/:id')
  @Locked('tenant:<headers.x-tenant>')
  async byHeader(@Param('id') id: string) {
    return { id };
  }
}

/** Whether Nest calls the route's handler behind `LockedInterceptor`. */
function intercepted(method: keyof DirectController): boolean {
  const list: unknown[] =
    Reflect.getMetadata(INTERCEPTORS_METADATA, DirectController.prototype[method]) ?? [];
  return list.includes(LockedInterceptor);
}

/** The first chunk of a streamed answer has arrived; `body` is the rest, `abort` leaves. */
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

describe.each([
  ['express', false],
  ['fastify', true],
])('@Locked routes called without LockedInterceptor (%s)', (platform, fastify) => {
  const prefix = uniquePrefix(`direct-routes-${platform}`);
  let app: INestApplication;
  let locks: LockService;
  let redis: Redis;
  let port: number;
  let interceptions: jest.SpyInstance;

  const create = (
    lock: Omit<RedisLockModuleOptions, 'prefix'>,
    providers: Provider[] = [PassThrough],
  ) =>
    createDecoratorApp({
      prefix,
      controllers: [DirectController],
      providers,
      lock: { busyLogLevel: 'warn', ...lock },
      listen: true,
      fastify,
    });
  const released = (key: string) => waitFor(async () => !(await locks.isLocked(key)), 3_000, 5);

  beforeAll(async () => {
    redis = redisClient();
    runs.reset();
    app = await create({});
    locks = app.get(LockService);
    port = (app.getHttpServer().address() as AddressInfo).port;
  });

  beforeEach(() => {
    interceptions = jest.spyOn(LockedInterceptor.prototype, 'intercept');
  });

  afterEach(() => {
    jest.restoreAllMocks();
    runs.openAll();
  });

  afterAll(async () => {
    runs.openAll();
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('routes a handler keyed from its parameters without LockedInterceptor', async () => {
    expect(intercepted('busy')).toBe(false);
    expect(intercepted('file')).toBe(false);
    expect(intercepted('busyIntercepted')).toBe(true);
    expect(intercepted('byHeader')).toBe(true);
    expect((await request(app.getHttpServer()).get('/direct/busy/b-0')).status).toBe(200);
    expect(interceptions).not.toHaveBeenCalled();
    expect((await request(app.getHttpServer()).get('/direct/busy-intercepted/b-0')).status).toBe(
      200,
    );
    expect(interceptions).toHaveBeenCalledTimes(1);
  });

  it('answers a busy lock as its intercepted twin: 409, the same body, Retry-After, a log line naming the handler', async () => {
    const warn = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    const holder = await locks.acquire('busy:b-1');
    try {
      const direct = await request(app.getHttpServer()).get('/direct/busy/b-1');
      const twin = await request(app.getHttpServer()).get('/direct/busy-intercepted/b-1');
      expect(direct.status).toBe(409);
      expect(direct.headers['retry-after']).toBe('1');
      expect(direct.body).toEqual({
        statusCode: 409,
        error: 'Conflict',
        message: expect.any(String),
      });
      expect([twin.status, twin.headers['retry-after'], twin.body]).toEqual([
        direct.status,
        direct.headers['retry-after'],
        direct.body,
      ]);
      expect(interceptions).toHaveBeenCalledTimes(1); // the twin's alone
      const lines = warn.mock.calls.map(([line]) => String(line));
      expect(lines).toEqual([
        expect.stringMatching(/^DirectController\.busy answered 409: LockNotAcquiredError: /),
        expect.stringMatching(
          /^DirectController\.busyIntercepted answered 409: LockNotAcquiredError: /,
        ),
      ]);
      // Word for word, but for the method's name and how long the holder's lease had left.
      const shape = (line: string) => line.replace(/^\S+ /, '').replace(/\d+ ms/, 'N ms');
      expect(shape(lines[0]!)).toBe(shape(lines[1]!));
    } finally {
      await holder.release();
    }
  });

  it('keys from the argument its pipe produced: /number/042 and /number/42 are one lock, n:42', async () => {
    for (const path of ['/direct/number/042', '/direct/number/42']) {
      const answer = await request(app.getHttpServer()).get(path);
      expect(answer.body).toEqual({ key: 'n:42', id: 42 });
    }
    const holder = await locks.acquire('n:42');
    try {
      expect((await request(app.getHttpServer()).get('/direct/number/042')).status).toBe(409);
    } finally {
      await holder.release();
    }
    expect(interceptions).not.toHaveBeenCalled();
  });

  it('holds the key of a StreamableFile until its stream ended', async () => {
    const key = 'file:f-1';
    const first = await openStream(port, '/direct/file/f-1');
    expect(first.status).toBe(200);
    await sleep(50); // well past the handler's return
    expect(await locks.isLocked(key)).toBe(true);
    expect((await request(app.getHttpServer()).get('/direct/file/f-1')).status).toBe(409);
    runs.open(key);
    expect(await first.body).toBe('first chunk;');
    await released(key);
    expect(runs.maxConcurrent(key)).toBe(1);
    expect(interceptions).not.toHaveBeenCalled();
  });

  it('releases the key of a StreamableFile when its client leaves while reading', async () => {
    const key = 'file:f-2';
    const first = await openStream(port, '/direct/file/f-2');
    await sleep(50);
    expect(await locks.isLocked(key)).toBe(true);
    first.abort();
    await released(key);
  });

  it('releases the key of a StreamableFile whose client left before the handler resolved', async () => {
    const req = http.get({ host: '127.0.0.1', port, path: '/direct/late-file/f-3' });
    req.on('error', () => undefined);
    await waitFor(() => locks.isLocked('late-file:f-3'));
    req.destroy();
    await sleep(50);
    runs.open('late:f-3'); // the handler resolves to its file now, for a client that is gone
    await waitFor(() => runs.started('late-file:f-3') === 1);
    await released('late-file:f-3');
  });

  it('keeps LockedInterceptor for a key read from the request: a header no parameter supplies', async () => {
    const holder = await locks.acquire('tenant:acme');
    try {
      const answer = await request(app.getHttpServer())
        .get('/direct/tenant/t-1')
        .set('x-tenant', 'acme');
      expect(answer.status).toBe(409);
      expect(interceptions).toHaveBeenCalledTimes(1);
    } finally {
      await holder.release();
    }
  });

  describe('another app in this process that needs LockedInterceptor on the same routes', () => {
    /** The same controller, in an app with `extra` and the module `lock` options. */
    async function withApp(
      lock: Omit<RedisLockModuleOptions, 'prefix'>,
      extra: NonNullable<Parameters<typeof create>[1]>,
      check: (other: INestApplication, otherLocks: LockService) => Promise<void>,
    ): Promise<void> {
      const other = await create(lock, extra);
      try {
        await check(other, other.get(LockService));
      } finally {
        await other.close();
      }
    }

    it('an interceptor of the app (APP_INTERCEPTOR): the route gets LockedInterceptor back', async () => {
      await withApp(
        {},
        [PassThrough, { provide: APP_INTERCEPTOR, useClass: PassThrough }],
        async (other) => {
          expect(intercepted('busy')).toBe(true);
          expect((await request(other.getHttpServer()).get('/direct/busy/b-2')).status).toBe(200);
          expect(interceptions).toHaveBeenCalledTimes(1);
        },
      );
      // The first app's route was registered without it, and stays so.
      expect((await request(app.getHttpServer()).get('/direct/busy/b-2')).status).toBe(200);
      expect(interceptions).toHaveBeenCalledTimes(1);
    });

    it('while an app that needs LockedInterceptor runs, an app started beside it keeps it too', async () => {
      const interceptedApp = [PassThrough, { provide: APP_INTERCEPTOR, useClass: PassThrough }];
      await withApp({}, interceptedApp, async (first) => {
        // An app that needs none, started while the first runs: it must not take it off the
        // method both share (Nest reads it again for each request of a request-scoped route).
        await withApp({}, [PassThrough], async (second) => {
          expect(intercepted('busy')).toBe(true);
          expect((await request(second.getHttpServer()).get('/direct/busy/b-6')).status).toBe(200);
          expect(interceptions).toHaveBeenCalledTimes(1);
        });
        expect((await request(first.getHttpServer()).get('/direct/busy/b-6')).status).toBe(200);
        expect(interceptions).toHaveBeenCalledTimes(2);
      });
    });

    it("a filter of the user's that catches HttpException still reshapes the busy answer", async () => {
      await withApp(
        {},
        [PassThrough, { provide: APP_FILTER, useClass: Envelope }],
        async (other, otherLocks) => {
          const holder = await otherLocks.acquire('busy:b-3');
          try {
            const answer = await request(other.getHttpServer()).get('/direct/busy/b-3');
            expect(answer.status).toBe(409);
            expect(answer.body).toEqual({ envelope: { status: 409 } });
            expect(answer.headers['retry-after']).toBe('1');
          } finally {
            await holder.release();
          }
        },
      );
    });

    it('answerLockErrors: false: the busy answer is still 409, from the interceptor', async () => {
      await withApp({ answerLockErrors: false }, [PassThrough], async (other, otherLocks) => {
        const holder = await otherLocks.acquire('busy:b-4');
        try {
          const answer = await request(other.getHttpServer()).get('/direct/busy/b-4');
          expect(answer.status).toBe(409);
          expect(answer.headers['retry-after']).toBe('1');
        } finally {
          await holder.release();
        }
      });
    });

    it("an exceptionFactory is given the handler's ExecutionContext", async () => {
      const exceptionFactory = (_error: Error, host: ArgumentsHost) =>
        new HttpException({ handler: (host as ExecutionContext).getHandler().name }, 423);
      await withApp({ exceptionFactory }, [PassThrough], async (other, otherLocks) => {
        const holder = await otherLocks.acquire('busy:b-5');
        try {
          const answer = await request(other.getHttpServer()).get('/direct/busy/b-5');
          expect([answer.status, answer.body]).toEqual([423, { handler: 'busy' }]);
        } finally {
          await holder.release();
        }
      });
    });
  });
});
