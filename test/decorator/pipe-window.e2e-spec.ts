/**
 * A route's lock is taken after its pipes, so nothing the lock does while a slow pipe runs (a
 * `maxHold` running out, a shutdown's grace running out) can leave the handler running without
 * it: when the handler runs, no other client can hold its key — on Express and on Fastify.
 */
import {
  Controller,
  Injectable,
  Param,
  Post,
  type INestApplication,
  type PipeTransform,
} from '@nestjs/common';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import request from 'supertest';
import { currentLock, Locked, type LockService } from 'nestjs-redis-lock';
import { onSharedRedis } from '../support/lock-services';
import { sleep, waitFor } from '../support/time';
import { createDecoratorApp } from './decorator-app';

/** How many requests entered the pipe. */
let piped = 0;

@Injectable()
class SlowPipe implements PipeTransform {
  async transform(value: unknown): Promise<unknown> {
    piped++;
    await sleep(600);
    return value;
  }
}

interface Run {
  id: string;
  otherHolderHadKey: boolean;
  signalAborted: boolean;
}
const runs: Run[] = [];
let other: LockService;

@Controller('slow')
class SlowController {
  @Post(':id')
  @Locked('slow:<id>', { maxHold: 200 })
  async create(@Param('id', SlowPipe) id: string): Promise<{ ok: true }> {
    const lock = currentLock()!;
    const stolen = await other.tryAcquire(`slow:${id}`);
    runs.push({ id, otherHolderHadKey: stolen !== null, signalAborted: lock.signal.aborted });
    await stolen?.release();
    return { ok: true };
  }
}

const { prefix, redis, services, keyOf } = onSharedRedis('decorator-pipe-window');

beforeAll(() => {
  other = services.create();
});

describe.each([
  ['express', false],
  ['fastify', true],
] as const)('a slow pipe before a @Locked route (%s)', (_platform, fastify) => {
  let app: INestApplication;

  beforeAll(async () => {
    app = await createDecoratorApp({
      prefix,
      controllers: [SlowController],
      providers: [SlowPipe],
      fastify,
    });
  });
  afterAll(() => app?.close());
  beforeEach(() => void (runs.length = 0));

  it('runs the handler under its lock when a slow pipe took longer than maxHold', async () => {
    const res = await request(app.getHttpServer()).post('/slow/a');
    expect(res.status).toBe(201);
    expect(runs).toEqual([{ id: 'a', otherHolderHadKey: false, signalAborted: false }]);
  });

  it('never runs the handler without its lock when the app shuts down while a pipe runs', async () => {
    const closing = await createDecoratorApp({
      prefix,
      controllers: [SlowController],
      providers: [SlowPipe],
      lock: { shutdownGrace: 100 },
      listen: true,
      fastify,
    });
    // A connection of its own, closed after the answer: a kept-alive one would hold the server's
    // close() open until its keep-alive timeout (Node's 5 s on Express, Fastify's 72 s).
    const { port } = closing.getHttpServer().address() as AddressInfo;
    const answer = new Promise<number>((resolve) => {
      const req = http.request(
        { host: '127.0.0.1', port, path: '/slow/b', method: 'POST', agent: false },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on('error', () => resolve(0));
      req.end();
    });
    const before = piped;
    await waitFor(() => piped > before, 2_000);
    await closing.close(); // while the pipe runs: the shutdown refuses the lock the handler needs
    expect(await answer).toBe(503);
    expect(runs).toEqual([]);
    expect(await redis.exists(keyOf('slow:b'))).toBe(0);
  });
});
