/**
 * `@Locked` on controller handlers, through real Express and Fastify servers (every test runs on
 * both): keys from the handler's parameters or a named request source, 409 + Retry-After when
 * busy, 400 for a bad key (with nothing written to Redis), the handler's own errors untouched,
 * `wait`, an SSE stream's key released when its client leaves, the answer to a lock lost
 * mid-request, and the module-level status / exception factory.
 */
import {
  Body,
  ConflictException,
  Controller,
  Get,
  Headers,
  type CanActivate,
  type ExecutionContext,
  Injectable,
  Logger,
  NotFoundException,
  Param,
  Post,
  Query,
  Sse,
  UseGuards,
  type INestApplication,
  type MessageEvent,
} from '@nestjs/common';
import type Redis from 'ioredis';
import type { AddressInfo } from 'node:net';
import { interval, map, Subject, type Observable } from 'rxjs';
import request from 'supertest';
import {
  currentLock,
  LockLostError,
  LockNotAcquiredError,
  LockService,
  Locked,
} from 'nestjs-redis-lock';
import { deleteKeys, redisClient, SHARED_REDIS_URL } from '../support/shared-redis';
import { Gate, sleep, waitFor } from '../support/time';
import { uniquePrefix } from '../support/unique-prefix';
import { createDecoratorApp, keysUnder, leaseKey } from './decorator-app';
import { openSse, sseEvents } from './fixtures/sse-events';
import { httpAnswer } from './fixtures/transport-app';

/** What a busy route answers by default: Nest's shape, no key, no advice. */
const BUSY_BODY = {
  statusCode: 409,
  error: 'Conflict',
  message: 'Another request is working on the same resource. Try again shortly.',
};

/** What a route answers by default for a key it cannot build from the request. */
const BAD_REQUEST_BODY = {
  statusCode: 400,
  error: 'Bad Request',
  message: 'The request is missing a value this operation needs, or a value is invalid.',
};

/** Every test below runs once per HTTP platform Nest ships an adapter for. */
const PLATFORMS = [
  ['express', { fastify: false, getBody: { status: 200, text: 'gb:B' } }],
  // Fastify never parses the body of a GET (or HEAD) request: `<body.x>` has no value there.
  ['fastify', { fastify: true, getBody: { status: 400, text: JSON.stringify(BAD_REQUEST_BODY) } }],
] as const;

/** What a route answers when its lock was lost while it ran (`onLost: 'throw'`, the default). */
const LOST_BODY = {
  statusCode: 500,
  error: 'Internal Server Error',
  message:
    'The request was processed, but its outcome could not be confirmed. Check the result before ' +
    'repeating it.',
};

/** Resolves once `signal` aborts, or after `max` ms (the test then fails on what it saw). */
function aborted(signal: AbortSignal, max = 3_000): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, max);
    const done = (): void => {
      clearTimeout(timer);
      resolve();
    };
    if (signal.aborted) done();
    else signal.addEventListener('abort', done, { once: true });
  });
}

/** Sets `request.user` as an auth guard would (guards run before interceptors). */
@Injectable()
class FakeAuthGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const req = context.switchToHttp().getRequest<{ user?: unknown }>();
    req.user = { id: 'user-from-guard', org: { id: 'org-7' }, d: { id: 'D-from-user' } };
    return true;
  }
}

/** Counts requests that reached the route (guards run just before the lock interceptor). */
@Injectable()
class ArrivalGuard implements CanActivate {
  static arrived = 0;
  static expected = 0;
  canActivate(): boolean {
    ArrivalGuard.arrived++;
    return true;
  }
}

/** Resolves once the expected burst arrived (or after `max` ms), so it is really concurrent. */
async function allArrived(max = 5_000): Promise<void> {
  const deadline = performance.now() + max;
  while (ArrivalGuard.arrived < ArrivalGuard.expected && performance.now() < deadline) {
    await sleep(5);
  }
}

@Controller('orders')
class OrdersController {
  runs = 0;
  /** Takes the running handler's lock away, as an operator's `forceRelease` elsewhere would. */
  loseLock: (key: string) => Promise<unknown> = async () => undefined;
  /** Why the lock of `losesItsLock` ended, as its signal told the handler. */
  lostReason: unknown;
  /** [start, end] of each run of `waitsForTheLock`, on the monotonic clock. */
  readonly waitedRuns: [number, number][] = [];

  @Post(':userId')
  @UseGuards(ArrivalGuard)
  @Locked('order:<userId>')
  async create(@Param('userId') userId: string): Promise<{ userId: string; fence: number }> {
    this.runs++;
    // Hold ~200 ms after the whole burst arrived (a cold server may take longer to accept it all).
    await allArrived();
    await sleep(200);
    return { userId, fence: currentLock()!.fence };
  }

  @Post('by-body/check')
  @Locked('body:<body.userId>')
  async byBody(@Body() body: { userId: unknown }): Promise<{ ok: true }> {
    this.runs++;
    void body;
    return { ok: true };
  }

  @Get('missing/:id')
  @Locked('missing:<id>')
  find(@Param('id') id: string): never {
    throw new NotFoundException(`Order ${id} does not exist`);
  }

  @Get('broken/:id')
  @Locked('broken:<id>')
  broken(@Param('id') id: string): never {
    void id;
    throw new Error('handler bug');
  }

  @Post('sources/:a')
  @UseGuards(FakeAuthGuard)
  @Locked('src:<a>:<b>:<c>:<user.d.id>')
  async fromParameters(
    @Param('a') a: string,
    @Query('b') b: string,
    @Body('c') c: string,
  ): Promise<string> {
    void [a, b, c];
    return currentLock()!.key;
  }

  @Post('explicit/:x')
  @UseGuards(FakeAuthGuard)
  @Locked('x:<params.x>:<query.x>:<body.x>:<headers.X-Tenant>:<user.org.id>')
  async explicit(@Headers('x-tenant') tenant: string): Promise<string> {
    void tenant;
    return currentLock()!.key;
  }

  @Get('get-body')
  @Locked('gb:<body.x>')
  async fromGetBody(): Promise<string> {
    return currentLock()!.key;
  }

  @Get('precedence/:id')
  @Locked('p:<id>')
  async precedence(@Query('id') fromQuery: string): Promise<string> {
    void fromQuery;
    return currentLock()!.key;
  }

  @Get('by-function/:tenant/:id')
  @Locked((context: ExecutionContext) => {
    const req = context.switchToHttp().getRequest<{ params: Record<string, string> }>();
    return `fn:${req.params.tenant}/${req.params.id}`;
  })
  async byFunction(): Promise<string> {
    return currentLock()!.key;
  }

  @Get('bad-function')
  @Locked(() => '')
  async badFunction(): Promise<string> {
    return 'never';
  }

  @Get('no-key-function')
  @Locked(() => undefined as unknown as string)
  async noKeyFunction(): Promise<string> {
    this.runs++;
    return 'never';
  }

  @Get('long-function')
  @Locked(() => 'k'.repeat(600))
  async longFunction(): Promise<string> {
    this.runs++;
    return 'never';
  }

  @Get('skip/:id')
  @Locked('skip:<id>', { onBusy: 'skip' })
  async skipWhenBusy(@Param('id') id: string): Promise<{ ran: string }> {
    this.runs++;
    return { ran: id };
  }

  @Post('wait/:id')
  @Locked('wait:<id>', { wait: 3_000 })
  async waitsForTheLock(@Param('id') id: string): Promise<string> {
    void id;
    const start = performance.now();
    await sleep(150);
    this.waitedRuns.push([start, performance.now()]);
    return 'done';
  }

  /** Endless: only the client leaving ends it. */
  @Sse('events/:id')
  @Locked('sse:<id>')
  events(@Param('id') id: string): Observable<MessageEvent> {
    return interval(50).pipe(map((n) => ({ data: { id, n } })));
  }

  /** The open `lost-events` streams and their locks' signals, by id: the test drives them. */
  readonly lostStreams = new Map<string, { events: Subject<MessageEvent>; signal: AbortSignal }>();

  @Sse('lost-events/:id')
  @Locked('sse-lost:<id>', { ttl: 600 })
  lostEvents(@Param('id') id: string): Observable<MessageEvent> {
    const events = new Subject<MessageEvent>();
    this.lostStreams.set(id, { events, signal: currentLock()!.signal });
    return events;
  }

  /** Loses its lock, and finishes once its signal told it so. */
  @Post('lost/:id')
  @Locked('lost:<id>', { ttl: 600 })
  async losesItsLock(@Param('id') id: string): Promise<string> {
    const { signal } = currentLock()!;
    await this.loseLock(`lost:${id}`);
    await aborted(signal);
    this.lostReason = signal.reason;
    return 'finished';
  }
}

describe.each(PLATFORMS)('@Locked on controller routes (%s)', (platform, { fastify, getBody }) => {
  const prefix = uniquePrefix(`decorator-http-${platform}`);
  let app: INestApplication;
  let controller: OrdersController;
  let locks: LockService;
  /** An operator's LockService on the same Redis and prefix, in "another process". */
  let operator: LockService;
  let redis: Redis;

  beforeAll(async () => {
    redis = redisClient();
    app = await createDecoratorApp({
      prefix,
      controllers: [OrdersController],
      listen: true,
      fastify,
    });
    controller = app.get(OrdersController);
    locks = app.get(LockService);
    operator = new LockService({ redis: SHARED_REDIS_URL, prefix });
  });

  afterAll(async () => {
    await operator?.close();
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  beforeEach(() => {
    controller.runs = 0;
  });

  it('runs exactly one of 50 parallel requests for one user; the rest get 409 with Retry-After', async () => {
    const server = app.getHttpServer();
    ArrivalGuard.arrived = 0;
    ArrivalGuard.expected = 50;
    const responses = await Promise.all(
      Array.from({ length: 50 }, () => request(server).post('/orders/user-1')),
    );

    const ok = responses.filter((response) => response.status >= 200 && response.status < 300);
    const busy = responses.filter((response) => response.status === 409);
    expect(ok).toHaveLength(1);
    expect(busy).toHaveLength(49);
    expect(controller.runs).toBe(1);
    expect(ok[0]!.body).toEqual({ userId: 'user-1', fence: expect.any(Number) });
    for (const response of busy) {
      expect(Number(response.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      expect(response.headers['content-type']).toMatch(/application\/json/);
      // No request value in the body: the key is in the log only.
      expect(response.body).toEqual(BUSY_BODY);
    }
    expect(await locks.isLocked('order:user-1')).toBe(false);
  });

  it('locks per user: different users run in parallel', async () => {
    const server = app.getHttpServer();
    // Each handler waits until all three are in: they can only all succeed if they overlap.
    ArrivalGuard.arrived = 0;
    ArrivalGuard.expected = 3;
    const responses = await Promise.all(
      ['user-a', 'user-b', 'user-c'].map((user) => request(server).post(`/orders/${user}`)),
    );
    expect(responses.map((response) => response.status)).toEqual([201, 201, 201]);
    expect(controller.runs).toBe(3);
  });

  describe('a placeholder without a usable value is a 400, and nothing is written to Redis', () => {
    /** The reason is logged (a warning), not sent: the body is the generic 400. */
    let warned: jest.SpyInstance;
    beforeEach(() => {
      warned = jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    });
    afterEach(() => warned.mockRestore());
    const warning = (): string => warned.mock.calls.map(([line]) => String(line)).join('\n');

    it.each([
      ['missing', {}],
      ['null', { userId: null }],
      ['an empty string', { userId: '' }],
      ['an object', { userId: { $gt: '' } }],
      ['an array', { userId: ['a', 'b'] }],
    ])('userId %s', async (_what, body) => {
      const response = await request(app.getHttpServer()).post('/orders/by-body/check').send(body);
      expect(response.status).toBe(400);
      expect(response.body).toEqual(BAD_REQUEST_BODY);
      expect(warning()).toContain('placeholder <body.userId>');
      expect(controller.runs).toBe(0);
      expect(await keysUnder(redis, `${prefix}{body:`)).toEqual([]);
      expect(await redis.exists(leaseKey(prefix, 'body:undefined'))).toBe(0);
      expect(await redis.exists(leaseKey(prefix, 'body:null'))).toBe(0);
    });

    it('a key function that returns an empty string', async () => {
      const response = await request(app.getHttpServer()).get('/orders/bad-function');
      expect(response.status).toBe(400);
      expect(response.body).toEqual(BAD_REQUEST_BODY);
      expect(warning()).toMatch(/key function .* returned an empty string/);
    });

    it('a key function that returns no string', async () => {
      const response = await request(app.getHttpServer()).get('/orders/no-key-function');
      expect(response.status).toBe(400);
      expect(response.body).toEqual(BAD_REQUEST_BODY);
      expect(warning()).toMatch(/key function .* returned undefined/);
      expect(controller.runs).toBe(0);
    });

    it('a key function that returns a key over maxKeyLength', async () => {
      const response = await request(app.getHttpServer()).get('/orders/long-function');
      expect(response.status).toBe(400);
      expect(response.body).toEqual(BAD_REQUEST_BODY);
      expect(warning()).toMatch(/over the limit of 512/);
      expect(controller.runs).toBe(0);
      expect(await keysUnder(redis, `${prefix}{kkk`)).toEqual([]);
    });

    it('a key over maxKeyLength', async () => {
      const response = await request(app.getHttpServer())
        .post('/orders/by-body/check')
        .send({ userId: 'x'.repeat(600) });
      expect(response.status).toBe(400);
      expect(response.body).toEqual(BAD_REQUEST_BODY);
      expect(warning()).toMatch(/over the limit of 512/);
      expect(controller.runs).toBe(0);
      expect(await keysUnder(redis, `${prefix}{body:`)).toEqual([]);
    });
  });

  it("passes the handler's NotFoundException through unchanged, and releases the lock", async () => {
    const response = await request(app.getHttpServer()).get('/orders/missing/42');
    expect(response.status).toBe(404);
    expect(response.body).toEqual({
      statusCode: 404,
      error: 'Not Found',
      message: 'Order 42 does not exist',
    });
    expect(await locks.isLocked('missing:42')).toBe(false);
  });

  it("leaves the handler's own bug a plain 500 (not a lock error), and releases the lock", async () => {
    const response = await request(app.getHttpServer()).get('/orders/broken/1');
    expect(response.status).toBe(500);
    expect(response.body).toEqual({ statusCode: 500, message: 'Internal server error' });
    expect(await locks.isLocked('broken:1')).toBe(false);
  });

  it('answers 503 when Redis refuses the lock (a foreign value under its key), logging the fix', async () => {
    // Another application stored a hash under the lock's key: Redis answers WRONGTYPE.
    await redis.hset(leaseKey(prefix, 'order:user-foreign'), 'field', 'value');
    ArrivalGuard.arrived = 0;
    ArrivalGuard.expected = 1;
    const errors: string[] = [];
    const logged = jest
      .spyOn(Logger.prototype, 'error')
      .mockImplementation((line: unknown) => void errors.push(String(line)));
    let response: request.Response;
    try {
      response = await request(app.getHttpServer()).post('/orders/user-foreign');
    } finally {
      logged.mockRestore();
    }
    expect(response.status).toBe(503);
    expect(response.body).toEqual({
      statusCode: 503,
      error: 'Service Unavailable',
      message: 'The service is temporarily unavailable. Try again later.',
    });
    expect(errors).toEqual([expect.stringMatching(/WRONGTYPE.*`prefix` option/)]);
    expect(controller.runs).toBe(0);
    expect(await redis.hget(leaseKey(prefix, 'order:user-foreign'), 'field')).toBe('value');
  });

  it('reads each bare name from the parameter that declares it: same-named fields elsewhere change nothing', async () => {
    const response = await request(app.getHttpServer())
      .post('/orders/sources/A?b=B&a=not-this-one&c=no')
      .send({ c: 'C', a: 'no', b: 'no', d: { id: 'D-from-body' } });
    expect(response.status).toBe(201);
    expect(response.text).toBe('src:A:B:C:D-from-user');
  });

  it('reads <body.x> of a GET where the platform parses it', async () => {
    const response = await request(app.getHttpServer()).get('/orders/get-body').send({ x: 'B' });
    expect({ status: response.status, text: response.text }).toEqual(getBody);
  });

  it("takes a bare name's source from its parameter's binding: @Query('id') reads the query, not the route", async () => {
    const response = await request(app.getHttpServer()).get('/orders/precedence/from-path?id=q');
    expect(response.text).toBe('p:q');
  });

  it('reads explicit sources: <params.x>, <query.x>, <body.x>, <headers.x>, <user.x>', async () => {
    const response = await request(app.getHttpServer())
      .post('/orders/explicit/P?x=Q')
      .set('X-Tenant', 'H')
      .send({ x: 'B' });
    expect(response.status).toBe(201);
    expect(response.text).toBe('x:P:Q:B:H:org-7');
  });

  it('builds the key with a key function (ctx) => string on a controller', async () => {
    const response = await request(app.getHttpServer()).get('/orders/by-function/acme/9');
    expect(response.status).toBe(200);
    expect(response.text).toBe('fn:acme/9');
  });

  it("with onBusy: 'skip', answers 200 with an empty body without running the handler", async () => {
    const holder = await locks.acquire('skip:7');
    try {
      const skipped = await request(app.getHttpServer()).get('/orders/skip/7');
      expect(skipped.status).toBe(200);
      expect(skipped.text).toBe('');
      expect(controller.runs).toBe(0);
    } finally {
      await holder.release();
    }
    const ran = await request(app.getHttpServer()).get('/orders/skip/7');
    expect(ran.body).toEqual({ ran: '7' });
    expect(controller.runs).toBe(1);
  });

  it('with `wait`, lets the second caller run after the first releases', async () => {
    controller.waitedRuns.length = 0;
    const server = app.getHttpServer();
    const responses = await Promise.all([
      request(server).post('/orders/wait/1'),
      request(server).post('/orders/wait/1'),
    ]);
    expect(responses.map((response) => response.status)).toEqual([201, 201]);
    const [first, second] = [...controller.waitedRuns].sort((a, b) => a[0] - b[0]);
    expect(second![0]).toBeGreaterThanOrEqual(first![1]);
    // Woken by the release notification, not by polling the 30 s lease.
    expect(second![0] - first![1]).toBeLessThan(500);
  });

  it("holds an SSE stream's key while the client listens, and releases it when it leaves", async () => {
    const { port } = app.getHttpServer().address() as AddressInfo;
    const stream = await openSse(port, '/orders/events/7');
    expect(stream.firstEvent).toContain('data: {"id":"7","n":0}');
    expect(await locks.isLocked('sse:7')).toBe(true);
    await sleep(200);
    expect(await locks.isLocked('sse:7')).toBe(true);

    stream.abort();
    await waitFor(async () => !(await locks.isLocked('sse:7')), 2_000, 10);
  });

  it('ends an SSE stream whose lock was lost with an error event carrying the lost-lock message', async () => {
    const logged = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    try {
      const { port } = app.getHttpServer().address() as AddressInfo;
      const answer = httpAnswer(port, 'GET', '/orders/lost-events/s');
      await waitFor(() => controller.lostStreams.has('s'), 3_000, 5);
      const stream = controller.lostStreams.get('s')!;
      stream.events.next({ data: 'before' });
      await operator.forceRelease('sse-lost:s');
      await aborted(stream.signal); // the next renewal found the key gone
      expect(stream.signal.aborted).toBe(true);
      stream.events.next({ data: 'after' });
      stream.events.complete();

      const { status, body } = await answer;
      // The headers went out with the first event: the loss can only be told in the stream.
      expect(status).toBe(200);
      expect(sseEvents(body)).toEqual([
        { data: 'before' },
        { data: 'after' },
        { event: 'error', data: LOST_BODY.message },
      ]);
      expect(await locks.isLocked('sse-lost:s')).toBe(false);
    } finally {
      logged.mockRestore();
    }
  });

  it('answers a lock lost mid-request with 500 instead of a success (the work may have committed)', async () => {
    controller.loseLock = (key) => operator.forceRelease(key);
    const logged = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
    try {
      const lost: LockLostError[] = [];
      locks.on('lost', (error) => lost.push(error));
      const response = await request(app.getHttpServer()).post('/orders/lost/e');
      expect(response.status).toBe(500);
      expect(response.body).toEqual(LOST_BODY);
      expect(lost.map((error) => error.key)).toEqual(['lost:e']);
      expect(String(logged.mock.calls[0]?.[0])).toContain('Lock "lost:e" was lost');
      expect(controller.lostReason).toBeInstanceOf(LockLostError);
    } finally {
      logged.mockRestore();
      controller.loseLock = async () => undefined;
    }
  });
});

/** The first request holds its lock until the test has its second answer. */
const busyGate = new Gate();

@Controller('busy')
class BusyController {
  @Post(':id')
  @Locked('busy:<id>')
  async hold(@Param('id') id: string): Promise<string> {
    void id;
    await busyGate.opened;
    return 'held';
  }
}

describe.each(PLATFORMS)(
  '@Locked routes with module-level busy mapping (%s)',
  (platform, { fastify }) => {
    const prefix = uniquePrefix(`decorator-http-busy-${platform}`);
    let redis: Redis;
    const apps: INestApplication[] = [];

    beforeAll(() => {
      redis = redisClient();
    });

    afterAll(async () => {
      await Promise.all(apps.map((app) => app.close()));
      await deleteKeys(redis, prefix);
      await redis.quit();
    });

    async function twoAtOnce(app: INestApplication, id: string): Promise<request.Response> {
      const server = app.getHttpServer();
      const first = request(server).post(`/busy/${id}`).then();
      await waitFor(async () => (await redis.exists(leaseKey(prefix, `busy:${id}`))) === 1);
      const second = await request(server).post(`/busy/${id}`);
      busyGate.release();
      expect((await first).status).toBe(201);
      return second;
    }

    it('sends the configured busyStatus', async () => {
      const app = await createDecoratorApp({
        prefix,
        controllers: [BusyController],
        lock: { busyStatus: 423 },
        listen: true,
        fastify,
      });
      apps.push(app);
      const response = await twoAtOnce(app, 'status');
      expect(response.status).toBe(423);
      expect(response.headers['retry-after']).toBeDefined();
      expect(response.body).toEqual({ ...BUSY_BODY, statusCode: 423, error: 'Locked' });
    });

    it('sends what the configured exceptionFactory builds', async () => {
      const app = await createDecoratorApp({
        prefix,
        controllers: [BusyController],
        lock: {
          exceptionFactory: (error) =>
            error instanceof LockNotAcquiredError
              ? new ConflictException({ code: 'ORDER_IN_PROGRESS', key: error.key })
              : error,
        },
        listen: true,
        fastify,
      });
      apps.push(app);
      const response = await twoAtOnce(app, 'factory');
      expect(response.status).toBe(409);
      expect(response.body).toEqual({ code: 'ORDER_IN_PROGRESS', key: 'busy:factory' });
    });
  },
);
