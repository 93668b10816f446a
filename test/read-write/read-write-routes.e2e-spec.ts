/**
 * `@Locked(…, { mode: 'read' })` on HTTP routes: concurrent reads of a document run together,
 * a write route (a plain `@Locked` on the same key) answers 409 + Retry-After while a read holds
 * and runs once it is done. The same app runs on the shared Redis and on the in-memory backend
 * of `nestjs-redis-lock/testing`, whose read-write leases behave the same.
 */
import { Controller, Get, Injectable, Param, Put, type INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { Locked, RedisLockConfigError, RedisLockModule } from 'nestjs-redis-lock';
import { RedisLockTestingModule } from 'nestjs-redis-lock/testing';
import { createDecoratorApp } from '../decorator/decorator-app';
import { Gate, waitFor } from '../support/time';
import { deleteKeys, redisClient, SHARED_REDIS_URL } from '../support/shared-redis';
import { uniquePrefix } from '../support/unique-prefix';

const gate = new Gate();

@Injectable()
class Reads {
  running = 0;
  maxRunning = 0;
}

@Controller('docs')
class DocsController {
  constructor(private readonly reads: Reads) {}

  @Get(':id')
  @Locked('doc:<id>', { mode: 'read' })
  async read(@Param('id') id: string): Promise<string> {
    this.reads.running++;
    this.reads.maxRunning = Math.max(this.reads.maxRunning, this.reads.running);
    await gate.opened;
    this.reads.running--;
    return `doc ${id}`;
  }

  @Put(':id')
  @Locked('doc:<id>')
  async write(@Param('id') id: string): Promise<string> {
    return `wrote ${id}`;
  }
}

const prefix = uniquePrefix('rw-routes');
const redis = redisClient();
afterAll(async () => {
  await deleteKeys(redis, prefix);
  await redis.quit();
});

describe.each([
  [
    'on Redis',
    () =>
      createDecoratorApp({
        prefix,
        controllers: [DocsController],
        providers: [Reads],
        listen: true,
      }),
  ],
  [
    'on the in-memory testing backend',
    async () => {
      const moduleRef = await Test.createTestingModule({
        imports: [RedisLockTestingModule.forRoot()],
        controllers: [DocsController],
        providers: [Reads],
      }).compile();
      const app = moduleRef.createNestApplication({ logger: false });
      await app.listen(0, '127.0.0.1');
      return app;
    },
  ],
])('read routes %s', (_, create: () => Promise<INestApplication>) => {
  let app: INestApplication;
  beforeAll(async () => (app = await create()));
  afterAll(() => app?.close());

  it('runs concurrent reads together; a write answers 409 + Retry-After until they are done', async () => {
    const reads = app.get(Reads);
    const server = app.getHttpServer();
    const pending = [1, 2, 3].map(() => request(server).get('/docs/7'));
    const answers = Promise.all(pending.map((r) => r.then((res) => res)));
    await waitFor(() => reads.running === 3);
    const busy = await request(server).put('/docs/7');
    expect(busy.status).toBe(409);
    expect(Number(busy.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(busy.text).not.toContain('doc:7'); // no request values
    gate.release();
    expect((await answers).map((res) => res.text)).toEqual(['doc 7', 'doc 7', 'doc 7']);
    expect(reads.maxRunning).toBe(3);
    const wrote = await request(server).put('/docs/7');
    expect(wrote.status).toBe(200);
    expect(wrote.text).toBe('wrote 7');
    reads.maxRunning = 0;
  });
});

@Injectable()
class ReportService {
  @Locked('report:<id>', { mode: 'read' })
  async read(id: string): Promise<string> {
    return id;
  }
}

@Injectable()
class EditService {
  @Locked('doc:<id>', { writerPriority: false })
  async edit(id: string): Promise<string> {
    return id;
  }
}

it.each([
  [
    'a read lock on Redlock',
    ReportService,
    { redlock: { nodes: [1, 2, 3].map((port) => `redis://127.0.0.1:${port}`) } },
    /not available with `redlock`/,
  ],
])('refuses %s at bootstrap', async (_, provider, options, message) => {
  const moduleRef = await Test.createTestingModule({
    imports: [
      RedisLockModule.forRoot({ ...options, prefix, startupCheck: 'off', redis: SHARED_REDIS_URL }),
    ],
    providers: [provider],
  }).compile();
  try {
    await expect(moduleRef.init()).rejects.toThrow(message);
  } finally {
    await moduleRef.close().catch(() => undefined);
  }
});

it('runs a writer with priority off in fair mode (it takes no place in the queue)', async () => {
  const moduleRef = await Test.createTestingModule({
    imports: [
      RedisLockModule.forRoot({ fair: true, prefix, startupCheck: 'off', redis: SHARED_REDIS_URL }),
    ],
    providers: [EditService],
  }).compile();
  try {
    await moduleRef.init();
    expect(await moduleRef.get(EditService).edit('7')).toBe('7');
  } finally {
    await moduleRef.close();
  }
});

it('refuses a bad mode, and writerPriority on a read, when the class is defined', () => {
  expect(() => Locked('x', { mode: 'both' as unknown as 'read' })).toThrow(RedisLockConfigError);
  expect(() => Locked('x', { mode: 'read', writerPriority: false })).toThrow(/applies to writers/);
});
