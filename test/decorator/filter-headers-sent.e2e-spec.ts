/**
 * `LockExceptionFilter` when the handler had already started its `@Res()` answer: no status can be
 * sent any more, so the filter logs the failure and ends the response instead of throwing
 * `ERR_HTTP_HEADERS_SENT` (which left the client with a cut-off answer). On Fastify too, where
 * headers written to `reply.raw` do not make Nest's adapter call the reply sent.
 */
import { Controller, Injectable, Logger, Param, Post, Res } from '@nestjs/common';
import type { INestApplication } from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import type Redis from 'ioredis';
import http, { type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { LockExceptionFilter, LockService, Locked } from 'nestjs-redis-lock';
import { deleteKeys, redisClient } from '../support/shared-redis';
import { uniquePrefix } from '../support/unique-prefix';
import { createDecoratorApp } from './decorator-app';

@Injectable()
class ReportService {
  @Locked('report:<userId>')
  async build(userId: string): Promise<string> {
    return `report of ${userId}\n`;
  }
}

@Controller('reports')
class ReportController {
  constructor(private readonly reports: ReportService) {}

  /**
   * Streams a header line, then the report: the lock is taken after the answer started. Writes to
   * Node's response, which `@Res()` is on Express and `reply.raw` is on Fastify.
   */
  @Post(':userId')
  async stream(
    @Param('userId') userId: string,
    @Res() res: ServerResponse | { raw: ServerResponse },
  ): Promise<void> {
    const raw = 'raw' in res ? res.raw : res;
    raw.writeHead(200, { 'content-type': 'text/plain' });
    raw.write('report follows\n');
    raw.write(await this.reports.build(userId));
    raw.end();
  }
}

/** The answer as the client saw it: `complete` is false when the body was cut off. */
function post(
  port: number,
  path: string,
): Promise<{ status: number; body: string; complete: boolean }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path, method: 'POST' });
    const timer = setTimeout(() => {
      req.destroy();
      reject(new Error(`POST ${path} did not end within 5 s`));
    }, 5_000);
    req.on('response', (res) => {
      let body = '';
      const done = (): void => {
        clearTimeout(timer);
        resolve({ status: res.statusCode ?? 0, body, complete: res.complete });
      };
      res.on('data', (chunk: Buffer) => (body += chunk.toString()));
      res.on('end', done);
      res.on('aborted', done);
      res.on('error', done);
    });
    req.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    req.end();
  });
}

describe.each([
  ['Express', false],
  ['Fastify', true],
])('LockExceptionFilter after the response started (%s)', (_server, fastify) => {
  const prefix = uniquePrefix('filter-headers-sent');
  let app: INestApplication;
  let redis: Redis;
  let port: number;
  let logged: jest.SpyInstance;

  beforeAll(async () => {
    redis = redisClient();
    app = await createDecoratorApp({
      prefix,
      controllers: [ReportController],
      providers: [ReportService, { provide: APP_FILTER, useClass: LockExceptionFilter }] as never,
      listen: true,
      fastify,
    });
    port = (app.getHttpServer().address() as AddressInfo).port;
  });

  beforeEach(() => {
    logged = jest.spyOn(Logger.prototype, 'error').mockImplementation(() => undefined);
  });

  afterEach(() => logged.mockRestore());

  afterAll(async () => {
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('ends the started answer and logs the busy lock, instead of throwing ERR_HTTP_HEADERS_SENT', async () => {
    const held = await app.get(LockService).acquire('report:u-1');
    try {
      const answer = await post(port, '/reports/u-1');
      expect(answer).toEqual({ status: 200, body: 'report follows\n', complete: true });
    } finally {
      await held.release();
    }
    const lines = logged.mock.calls.map(([line]) => String(line));
    expect(lines).toContainEqual(expect.stringContaining('"report:u-1" is held by another holder'));
    expect(lines.join('\n')).not.toContain('ERR_HTTP_HEADERS_SENT');
  });

  it('still answers normally when the lock is free', async () => {
    const answer = await post(port, '/reports/u-2');
    expect(answer).toEqual({
      status: 200,
      body: 'report follows\nreport of u-2\n',
      complete: true,
    });
  });
});
