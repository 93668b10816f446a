/**
 * The same lifetimes as `response-lifetime.e2e-spec.ts`, through a real Fastify server: a
 * `@Res()` handler that calls `reply.send` from a callback holds the key until the response is
 * sent, a `StreamableFile` until its stream ended, a Promise handler until it settles after a
 * timeout interceptor gave up; a skipped `@Res()` route answers 204.
 */
import {
  Controller,
  Get,
  Param,
  Post,
  Res,
  SetMetadata,
  StreamableFile,
  UseInterceptors,
} from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import type { FastifyReply } from 'fastify';
import type Redis from 'ioredis';
import { Readable } from 'node:stream';
import request from 'supertest';
import { LockService, Locked, RedisLockModule } from 'nestjs-redis-lock';
import { deleteKeys, redisClient, SHARED_REDIS_URL } from '../support/shared-redis';
import { waitFor } from '../support/time';
import { uniquePrefix } from '../support/unique-prefix';
import {
  ConcurrentRuns,
  ReleaseOnReturnInterceptor,
  TIMEOUT_MS,
  TimeoutInterceptor,
} from './concurrent-runs';

const runs = new ConcurrentRuns();

@Controller()
class FastifyLifetimeController {
  @Post('slow/:userId')
  @SetMetadata(TIMEOUT_MS, 500)
  @Locked('slow:<userId>')
  slow(@Param('userId') userId: string): Promise<{ done: string }> {
    return runs.work(`slow:${userId}`);
  }

  @Post('res/:userId')
  @Locked('res:<userId>')
  async replyLater(@Param('userId') userId: string, @Res() reply: FastifyReply): Promise<void> {
    void runs.work(`res:${userId}`).then((body) => reply.status(201).send(body));
  }

  @Post('control/res/:userId')
  @UseInterceptors(ReleaseOnReturnInterceptor)
  controlReplyLater(@Param('userId') userId: string, @Res() reply: FastifyReply): void {
    void runs.work(`control:${userId}`).then((body) => reply.status(201).send(body));
  }

  @Get('file/:id')
  @Locked('file:<id>')
  async file(@Param('id') id: string): Promise<StreamableFile> {
    const key = `file:${id}`;
    runs.enter(key);
    const stream = new Readable({ read: () => undefined });
    stream.once('end', () => runs.leave(key));
    void runs.gate(key).then(() => stream.push(null));
    stream.push('first chunk;');
    return new StreamableFile(stream);
  }

  @Get('skip-res/:id')
  @Locked('skip-res:<id>', { onBusy: 'skip' })
  async skipRes(@Param('id') id: string, @Res() reply: FastifyReply): Promise<void> {
    void reply.status(200).send({ ran: id });
  }
}

describe('@Locked routes hold the key until the work for it is done (Fastify)', () => {
  const prefix = uniquePrefix('response-lifetime-fastify');
  let app: NestFastifyApplication;
  let locks: LockService;
  let redis: Redis;

  beforeAll(async () => {
    redis = redisClient();
    const moduleRef = await Test.createTestingModule({
      imports: [RedisLockModule.forRoot({ redis: SHARED_REDIS_URL, prefix })],
      controllers: [FastifyLifetimeController],
      providers: [
        { provide: APP_INTERCEPTOR, useClass: TimeoutInterceptor },
        ReleaseOnReturnInterceptor,
      ],
    }).compile();
    app = moduleRef.createNestApplication<NestFastifyApplication>(new FastifyAdapter(), {
      logger: false,
    });
    await app.listen(0, '127.0.0.1');
    locks = app.get(LockService);
  });

  afterEach(() => runs.openAll());

  afterAll(async () => {
    runs.openAll();
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  const server = () => app.getHttpServer();
  const released = (key: string) => waitFor(async () => !(await locks.isLocked(key)), 2_000, 5);
  const secondCall = (key: string, call: () => Promise<{ status: number }>) =>
    runs.answeredOrRan(key, () => call().then((response) => response.status));

  it('holds a Promise handler’s key until it settles after a timeout interceptor gave up', async () => {
    const key = 'slow:u-1';
    expect((await request(server()).post('/slow/u-1')).status).toBe(408);
    expect(runs.started(key)).toBe(1);
    expect(await secondCall(key, () => request(server()).post('/slow/u-1').then())).toBe(409);
    runs.open(key);
    await released(key);
    expect(runs.maxConcurrent(key)).toBe(1);
  });

  it('CONTROL: a lock released on return lets a second reply.send-later request run', async () => {
    const key = 'control:r-1';
    const first = request(server()).post('/control/res/r-1').then();
    await waitFor(() => runs.started(key) === 1, 3_000, 5);
    expect(await secondCall(key, () => request(server()).post('/control/res/r-1').then())).toBe(
      'ran',
    );
    expect(runs.maxConcurrent(key)).toBe(2);
    runs.open(key);
    expect((await first).status).toBe(201);
  });

  it('holds the key of a @Res() handler until reply.send from a callback sent the response', async () => {
    const key = 'res:u-2';
    const first = request(server()).post('/res/u-2').then();
    await waitFor(() => runs.started(key) === 1, 3_000, 5);
    expect(await secondCall(key, () => request(server()).post('/res/u-2').then())).toBe(409);
    runs.open(key);
    const answer = await first;
    expect(answer.status).toBe(201);
    expect(answer.body).toEqual({ done: key });
    await released(key);
    expect(runs.maxConcurrent(key)).toBe(1);
  });

  it('holds the key of a StreamableFile until its stream ended', async () => {
    const key = 'file:f-1';
    const first = request(server()).get('/file/f-1').then();
    await waitFor(() => runs.started(key) === 1, 3_000, 5);
    expect(await secondCall(key, () => request(server()).get('/file/f-1').then())).toBe(409);
    expect(await locks.isLocked(key)).toBe(true);
    runs.open(key);
    const answer = await first;
    expect(answer.status).toBe(200);
    expect(String(answer.body)).toBe('first chunk;'); // application/octet-stream: a Buffer
    await released(key);
    expect(runs.maxConcurrent(key)).toBe(1);
  });

  it('answers a skipped @Res() route with 204', async () => {
    const holder = await locks.acquire('skip-res:s-1');
    try {
      const skipped = await request(server()).get('/skip-res/s-1').timeout(3_000);
      expect(skipped.status).toBe(204);
    } finally {
      await holder.release();
    }
    expect((await request(server()).get('/skip-res/s-1').timeout(3_000)).body).toEqual({
      ran: 's-1',
    });
  });
});
