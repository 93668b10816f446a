/**
 * A route's lock is taken after its pipes, so nothing the lock does while a slow pipe runs (a
 * `maxHold` running out, a shutdown's grace running out) can leave the handler running without
 * it: when the handler runs, no other client can hold its key.
 */
import {
  Controller,
  Injectable,
  Param,
  Post,
  type INestApplication,
  type PipeTransform,
} from '@nestjs/common';
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
let app: INestApplication;

beforeAll(async () => {
  other = services.create();
  app = await createDecoratorApp({ prefix, controllers: [SlowController], providers: [SlowPipe] });
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
  });
  const answer = fetch(`${await closing.getUrl()}/slow/b`, { method: 'POST' }).then(
    (res) => res.status,
    () => 0,
  );
  const before = piped;
  await waitFor(() => piped > before, 2_000);
  await closing.close(); // while the pipe runs: the shutdown refuses the lock the handler needs
  expect(await answer).toBe(503);
  expect(runs).toEqual([]);
  expect(await redis.exists(keyOf('slow:b'))).toBe(0);
});
