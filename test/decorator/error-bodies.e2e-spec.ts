/**
 * What an HTTP client is told about a lock failure, through real Express and Fastify servers (the
 * route tests run on both) on real Redis:
 * by default Nest's shape (`statusCode`, `error`, `message`) with a generic message — no key (keys
 * hold e-mails and user ids), no Redis reply, no advice meant for developers — and the detail in
 * one log line through Nest's `Logger`. `errorDetails: 'detailed'` brings the detail back.
 */
import {
  Body,
  Controller,
  Injectable,
  Logger,
  Param,
  Post,
  type INestApplication,
} from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import type Redis from 'ioredis';
import request from 'supertest';
import {
  currentLock,
  LockExceptionFilter,
  LockService,
  Locked,
  RedisLockConfigError,
  type RedisLockModuleOptions,
} from 'nestjs-redis-lock';
import { freePort } from '../support/free-port';
import { startRedis, stopAllRedis } from '../support/redis-server';
import { deleteKeys, redisClient, SHARED_REDIS_URL } from '../support/shared-redis';
import { sleep } from '../support/time';
import { uniquePrefix } from '../support/unique-prefix';
import { createDecoratorApp, leaseKey } from './decorator-app';

/** The default bodies, exactly. */
const SAFE = {
  busy: {
    statusCode: 409,
    error: 'Conflict',
    message: 'Another request is working on the same resource. Try again shortly.',
  },
  badRequest: {
    statusCode: 400,
    error: 'Bad Request',
    message: 'The request is missing a value this operation needs, or a value is invalid.',
  },
  unavailable: {
    statusCode: 503,
    error: 'Service Unavailable',
    message: 'The service is temporarily unavailable. Try again later.',
  },
  outcomeUnknown: {
    statusCode: 500,
    error: 'Internal Server Error',
    message:
      'The request was processed, but its outcome could not be confirmed. Check the result ' +
      'before repeating it.',
  },
} as const;

/** Words of the library's developer advice, which must never reach an end user. */
const ADVICE = /wait|budget|prefix|Redis|lock|option|fence/i;

const EMAIL = 'alice@example.com';

/** Takes the lock away from the running handler, as another process could. */
let operator: LockService;

@Injectable()
class AccountService {
  @Locked('account:<email>')
  async touch(email: string): Promise<{ touched: string }> {
    return { touched: email };
  }
}

@Controller('accounts')
class AccountsController {
  constructor(private readonly accounts: AccountService) {}

  @Post('signup/:email')
  @Locked('signup:<email>')
  async signUp(@Param('email') email: string): Promise<{ email: string }> {
    return { email };
  }

  @Post('profile')
  @Locked('profile:<body.email>')
  async profile(@Body() body: { email: unknown }): Promise<{ ok: boolean }> {
    void body;
    return { ok: true };
  }

  /** Not locked itself: the lock is taken by the service, and `LockExceptionFilter` answers. */
  @Post('service/:email')
  viaService(@Param('email') email: string): Promise<{ touched: string }> {
    return this.accounts.touch(email);
  }

  /** A service call without a usable key value. */
  @Post('service-blank')
  blank(): Promise<{ touched: string }> {
    return this.accounts.touch('');
  }

  /** Loses its lock while it runs, then completes: the work may have committed. */
  @Post('jobs/:id')
  @Locked('job:<id>', { ttl: 600 })
  async job(@Param('id') id: string): Promise<string> {
    const { signal } = currentLock()!;
    await operator.forceRelease(`job:${id}`);
    // The next renewal (ttl / 3) finds the key gone and aborts the signal.
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, 3_000);
      signal.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
    });
    return 'committed';
  }
}

type Level = 'log' | 'warn' | 'error' | 'debug' | 'verbose';

/** Every line logged through Nest's `Logger` while a test runs, with its level. */
function captureLogs(): { lines: { level: Level; text: string }[]; restore: () => void } {
  const lines: { level: Level; text: string }[] = [];
  const spies = (['log', 'warn', 'error', 'debug', 'verbose'] as const).map((level) =>
    jest
      .spyOn(Logger.prototype, level)
      .mockImplementation(
        (...args: unknown[]) => void lines.push({ level, text: String(args[0]) }),
      ),
  );
  return { lines, restore: () => spies.forEach((spy) => spy.mockRestore()) };
}

/** The route tests below run once per HTTP platform Nest ships an adapter for. */
const PLATFORMS = [
  ['express', false],
  ['fastify', true],
] as const;

async function startApp(
  prefix: string,
  fastify: boolean,
  lock: Omit<RedisLockModuleOptions, 'prefix'> = {},
) {
  return createDecoratorApp({
    prefix,
    lock,
    fastify,
    controllers: [AccountsController],
    providers: [AccountService, { provide: APP_FILTER, useClass: LockExceptionFilter }] as never,
  });
}

/** The checks every default body passes: no request value, no reply, no advice. */
function expectNothingSpecific(response: request.Response, ...values: string[]): void {
  for (const value of values) expect(response.text).not.toContain(value);
  expect(response.body.message).not.toMatch(ADVICE);
  expect(Object.keys(response.body).sort()).toEqual(['error', 'message', 'statusCode']);
}

describe.each(PLATFORMS)('lock failures on HTTP routes, by default (%s)', (platform, fastify) => {
  const prefix = uniquePrefix(`error-bodies-${platform}`);
  let app: INestApplication;
  let locks: LockService;
  let redis: Redis;
  let logs: ReturnType<typeof captureLogs>;

  beforeAll(async () => {
    redis = redisClient();
    app = await startApp(prefix, fastify);
    locks = app.get(LockService);
    operator = new LockService({ redis: SHARED_REDIS_URL, prefix });
  });

  beforeEach(() => (logs = captureLogs()));
  afterEach(() => logs.restore());

  afterAll(async () => {
    await operator?.close();
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  const linesWith = (text: string) => logs.lines.filter((line) => line.text.includes(text));

  it('busy: 409 with Retry-After, the generic body, and the key and advice in one verbose line', async () => {
    const holder = await locks.acquire(`signup:${EMAIL}`);
    try {
      const response = await request(app.getHttpServer()).post(`/accounts/signup/${EMAIL}`);
      expect(response.status).toBe(409);
      expect(response.headers['retry-after']).toBe('1');
      expect(response.body).toEqual(SAFE.busy);
      expectNothingSpecific(response, 'alice', 'signup:');
      const lines = linesWith(`signup:${EMAIL}`);
      expect(lines).toEqual([
        {
          level: 'verbose',
          text: expect.stringMatching(/AccountsController\.signUp answered 409.*larger `wait`/),
        },
      ]);
    } finally {
      await holder.release();
    }
  });

  it('bad key: 400 with the generic body, and the reason in one warning', async () => {
    const response = await request(app.getHttpServer())
      .post('/accounts/profile')
      .send({ email: { $ne: EMAIL } });
    expect(response.status).toBe(400);
    expect(response.body).toEqual(SAFE.badRequest);
    expectNothingSpecific(response, 'alice', 'profile:', '<body.email>');
    expect(linesWith('<body.email>')).toEqual([
      { level: 'warn', text: expect.stringContaining('AccountsController.profile answered 400') },
    ]);
  });

  it('Redis refusing the command (WRONGTYPE): 503 with the generic body, the reply in one error line', async () => {
    await redis.hset(leaseKey(prefix, `signup:${EMAIL}`), 'foreign', 'value');
    try {
      const response = await request(app.getHttpServer()).post(`/accounts/signup/${EMAIL}`);
      expect(response.status).toBe(503);
      expect(response.body).toEqual(SAFE.unavailable);
      expectNothingSpecific(response, 'alice', 'WRONGTYPE');
      expect(linesWith('WRONGTYPE')).toEqual([
        { level: 'error', text: expect.stringContaining(`lock "signup:${EMAIL}"`) },
      ]);
    } finally {
      await redis.del(leaseKey(prefix, `signup:${EMAIL}`));
    }
  });

  it('lock lost after the work completed: 500 (not 503, which invites a retry), the loss in one error line', async () => {
    const response = await request(app.getHttpServer()).post('/accounts/jobs/j-1');
    expect(response.status).toBe(500);
    expect(response.headers['retry-after']).toBeUndefined();
    expect(response.body).toEqual(SAFE.outcomeUnknown);
    expectNothingSpecific(response, 'job:');
    expect(linesWith('answered 500')).toEqual([
      {
        level: 'error',
        text: expect.stringMatching(
          /AccountsController\.job answered 500.*Lock "job:j-1" was lost/,
        ),
      },
    ]);
  });

  it('LockExceptionFilter answers a busy service method the same way, logging it once', async () => {
    const holder = await locks.acquire(`account:${EMAIL}`);
    try {
      const response = await request(app.getHttpServer()).post(`/accounts/service/${EMAIL}`);
      expect(response.status).toBe(409);
      expect(response.headers['retry-after']).toBe('1');
      expect(response.body).toEqual(SAFE.busy);
      expectNothingSpecific(response, 'alice', 'account:');
      expect(linesWith(`account:${EMAIL}`)).toEqual([
        {
          level: 'verbose',
          text: expect.stringContaining('POST /accounts/service/:email answered 409'),
        },
      ]);
    } finally {
      await holder.release();
    }
  });

  it('LockExceptionFilter answers a bad key from a service method with the generic 400', async () => {
    const response = await request(app.getHttpServer()).post('/accounts/service-blank');
    expect(response.status).toBe(400);
    expect(response.body).toEqual(SAFE.badRequest);
    expectNothingSpecific(response, '<email>');
    expect(linesWith('<email>')).toEqual([
      { level: 'warn', text: expect.stringContaining('POST /accounts/service-blank answered 400') },
    ]);
  });
});

describe.each(PLATFORMS)(
  'lock failures on HTTP routes when Redis cannot be used (%s)',
  (platform, fastify) => {
    const prefix = uniquePrefix(`error-bodies-redis-${platform}`);
    const apps: INestApplication[] = [];
    let logs: ReturnType<typeof captureLogs>;

    beforeEach(() => (logs = captureLogs()));
    afterEach(() => logs.restore());

    afterAll(async () => {
      await Promise.all(apps.map((app) => app.close()));
      await stopAllRedis();
      // A client that never connected keeps a short disconnect timer; let it run out here.
      await sleep(250);
    });

    it('a wrong password: 503 with the generic body; the WRONGPASS reply only in the log', async () => {
      const server = await startRedis();
      const admin = redisClient(server.url);
      // The same as `--requirepass`, set after start: the harness' readiness PING has no AUTH.
      await admin.config('SET', 'requirepass', 'right-password');
      admin.disconnect();
      const app = await startApp(prefix, fastify, {
        redis: `redis://:wrong-password@127.0.0.1:${server.port}`,
        commandTimeout: 1_000,
        startupCheck: 'warn', // the app starts on the refused password, to answer requests
      });
      apps.push(app);

      const response = await request(app.getHttpServer()).post(`/accounts/signup/${EMAIL}`);
      expect(response.status).toBe(503);
      expect(response.body).toEqual(SAFE.unavailable);
      expectNothingSpecific(response, 'alice', 'WRONGPASS', 'password');
      const detailed = logs.lines.filter((line) => line.text.includes('answered 503'));
      expect(detailed).toEqual([
        { level: 'error', text: expect.stringMatching(/WRONGPASS|password/) },
      ]);
    });

    it('Redis out of reach: 503 with the generic body; the cause only in the log', async () => {
      const app = await startApp(prefix, fastify, {
        redis: `redis://127.0.0.1:${await freePort()}`,
        commandTimeout: 300,
        startupCheck: 'warn', // the app starts without Redis, to answer while it is out of reach
      });
      apps.push(app);
      const response = await request(app.getHttpServer()).post(`/accounts/signup/${EMAIL}`);
      expect(response.status).toBe(503);
      expect(response.body).toEqual(SAFE.unavailable);
      expectNothingSpecific(response, 'alice', '127.0.0.1');
      expect(logs.lines.filter((line) => line.text.includes('answered 503'))).toEqual([
        { level: 'error', text: expect.stringContaining('AccountsController.signUp') },
      ]);
    });
  },
);

describe.each(PLATFORMS)("errorDetails: 'detailed' (%s)", (platform, fastify) => {
  const prefix = uniquePrefix(`error-bodies-detailed-${platform}`);
  let app: INestApplication;
  let locks: LockService;
  let redis: Redis;
  let logs: ReturnType<typeof captureLogs>;

  beforeAll(async () => {
    redis = redisClient();
    app = await startApp(prefix, fastify, { errorDetails: 'detailed' });
    locks = app.get(LockService);
    operator = new LockService({ redis: SHARED_REDIS_URL, prefix });
  });

  beforeEach(() => (logs = captureLogs()));
  afterEach(() => logs.restore());

  afterAll(async () => {
    await operator?.close();
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('busy: the key, the advice and when the holder frees it, with the same status and header', async () => {
    const holder = await locks.acquire(`signup:${EMAIL}`);
    try {
      const response = await request(app.getHttpServer()).post(`/accounts/signup/${EMAIL}`);
      expect(response.status).toBe(409);
      expect(response.headers['retry-after']).toBe('1');
      expect(response.body).toEqual({
        statusCode: 409,
        error: 'Conflict',
        message: expect.stringMatching(/^Lock "signup:alice@example\.com" is held.*`wait` budget/),
        resource: `signup:${EMAIL}`,
        retryAfter: 1,
        retryAfterMs: expect.any(Number),
      });
      // Still logged once.
      expect(logs.lines.filter((line) => line.text.includes(`signup:${EMAIL}`))).toHaveLength(1);
    } finally {
      await holder.release();
    }
  });

  it('bad key: the LockKeyError message', async () => {
    const response = await request(app.getHttpServer()).post('/accounts/profile').send({});
    expect(response.status).toBe(400);
    expect(response.body).toEqual({
      statusCode: 400,
      error: 'Bad Request',
      message: expect.stringContaining('placeholder <body.email>'),
    });
  });

  it('Redis refusing the command: 503 with the reply and its fix', async () => {
    await redis.hset(leaseKey(prefix, 'signup:bob'), 'foreign', 'value');
    const response = await request(app.getHttpServer()).post('/accounts/signup/bob');
    expect(response.status).toBe(503);
    expect(response.body).toEqual({
      statusCode: 503,
      error: 'Service Unavailable',
      message: expect.stringMatching(/WRONGTYPE.*`prefix` option/),
    });
  });

  it('lock lost: 500 with the LockLostError message', async () => {
    const response = await request(app.getHttpServer()).post('/accounts/jobs/j-2');
    expect(response.status).toBe(500);
    expect(response.body).toEqual({
      statusCode: 500,
      error: 'Internal Server Error',
      message: expect.stringContaining('Lock "job:j-2" was lost'),
    });
  });
});

describe('the errorDetails option', () => {
  it("is validated at startup: 'safe' or 'detailed'", () => {
    expect(() => new LockService({ errorDetails: 'verbose' as never })).toThrow(
      RedisLockConfigError,
    );
    expect(() => new LockService({ errorDetails: 'verbose' as never })).toThrow(
      /`errorDetails` is "verbose"; expected 'safe' or 'detailed'/,
    );
  });
});
