/**
 * Lock failures thrown by services (a busy `@Locked` provider method, a `withLock`) that reach
 * Nest's default exception handling answer as `@Locked` handlers do, with nothing registered: 409
 * + `Retry-After` on HTTP (Express and Fastify), `LockTransportError` data to a TCP microservice's
 * caller and to a WebSocket client, `LOCK_BUSY` to a GraphQL client. The user's own filters still
 * win — on the method, on the class, through `app.useGlobalFilters()` or an `APP_FILTER` provider —
 * and `answerLockErrors: false` hands lock failures back to Nest (its 500).
 */
import {
  Catch,
  Controller,
  Injectable,
  Module,
  Param,
  Post,
  UseFilters,
  type ArgumentsHost,
  type ExceptionFilter,
  type INestApplication,
  type INestMicroservice,
} from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';
import { Mutation, Query, Resolver, Args } from '@nestjs/graphql';
import {
  ClientProxyFactory,
  MessagePattern,
  Payload,
  Transport,
  type MicroserviceOptions,
} from '@nestjs/microservices';
import { Test } from '@nestjs/testing';
import { MessageBody, SubscribeMessage, WebSocketGateway } from '@nestjs/websockets';
import type Redis from 'ioredis';
import { firstValueFrom } from 'rxjs';
import { io } from 'socket.io-client';
import request from 'supertest';
import { Locked, LockService, RedisLockModule } from 'nestjs-redis-lock';
import { freePort } from '../support/free-port';
import { deleteKeys, redisClient, SHARED_REDIS_URL } from '../support/shared-redis';
import { uniquePrefix } from '../support/unique-prefix';
import { createDecoratorApp } from './decorator-app';
import { createGraphQLApp, gql } from './fixtures/graphql-app';

const BUSY = 'Another request is working on the same resource. Try again shortly.';

@Injectable()
class OrderService {
  @Locked('order:<userId>')
  async place(userId: string): Promise<{ userId: string }> {
    return { userId };
  }
}

/** A user's catch-all filter: whatever it catches, it answers 418 with its own body. */
@Catch()
class TeapotFilter implements ExceptionFilter {
  catch(error: unknown, host: ArgumentsHost): void {
    const response = host.switchToHttp().getResponse<{
      status?: (code: number) => { json: (body: unknown) => void };
      code?: (code: number) => { send: (body: unknown) => void };
    }>();
    const body = { mine: true, name: (error as Error).name };
    if (response.code) response.code(418).send(body);
    else response.status!(418).json(body);
  }
}

@Controller('orders')
class OrdersController {
  constructor(
    private readonly orders: OrderService,
    private readonly locks: LockService,
  ) {}

  @Post(':userId')
  place(@Param('userId') userId: string) {
    return this.orders.place(userId);
  }

  @Post(':userId/manual')
  manual(@Param('userId') userId: string) {
    return this.locks.withLock(`order:${userId}`, () => ({ userId }));
  }

  @Post(':userId/own-filter')
  @UseFilters(TeapotFilter)
  ownFilter(@Param('userId') userId: string) {
    return this.orders.place(userId);
  }
}

async function whileHeld<T>(app: { get: INestApplication['get'] }, run: () => Promise<T>) {
  const held = await app.get(LockService).acquire('order:u1');
  try {
    return await run();
  } finally {
    await held.release();
  }
}

describe.each([
  ['express', false],
  ['fastify', true],
] as const)('HTTP on %s, nothing registered', (platform, fastify) => {
  const prefix = uniquePrefix(`default-answers-${platform}`);
  let app: INestApplication;
  let redis: Redis;

  beforeAll(async () => {
    redis = redisClient();
    app = await createDecoratorApp({
      prefix,
      controllers: [OrdersController],
      providers: [OrderService],
      fastify,
    });
  });

  afterAll(async () => {
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('answers a busy service method and a busy withLock with 409, Retry-After and a safe body', async () => {
    await whileHeld(app, async () => {
      for (const path of ['/orders/u1', '/orders/u1/manual']) {
        const response = await request(app.getHttpServer()).post(path);
        expect(response.status).toBe(409);
        expect(response.headers['retry-after']).toBe('1');
        expect(response.body).toEqual({ statusCode: 409, error: 'Conflict', message: BUSY });
        expect(response.text).not.toContain('u1');
      }
    });
  });

  it("leaves the answer to the user's own method filter", async () => {
    await whileHeld(app, async () => {
      const response = await request(app.getHttpServer()).post('/orders/u1/own-filter');
      expect(response.status).toBe(418);
      expect(response.body).toEqual({ mine: true, name: 'LockNotAcquiredError' });
    });
  });
});

describe("the user's global filters win", () => {
  const prefix = uniquePrefix('default-answers-global');
  let redis: Redis;
  beforeAll(() => (redis = redisClient()));
  afterAll(async () => {
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('over a catch-all APP_FILTER provider of the root module', async () => {
    const app = await createDecoratorApp({
      prefix,
      controllers: [OrdersController],
      providers: [OrderService, { provide: APP_FILTER, useClass: TeapotFilter }] as never,
    });
    try {
      await whileHeld(app, async () => {
        const response = await request(app.getHttpServer()).post('/orders/u1');
        expect(response.status).toBe(418);
        expect(response.body).toEqual({ mine: true, name: 'LockNotAcquiredError' });
      });
    } finally {
      await app.close();
    }
  });

  it('over a catch-all APP_FILTER provider of a feature module the app imports', async () => {
    @Module({ providers: [{ provide: APP_FILTER, useClass: TeapotFilter }] })
    class ErrorsModule {}
    const app = await createDecoratorApp({
      prefix,
      imports: [ErrorsModule],
      controllers: [OrdersController],
      providers: [OrderService],
    });
    try {
      await whileHeld(app, async () => {
        const response = await request(app.getHttpServer()).post('/orders/u1');
        expect(response.status).toBe(418);
      });
    } finally {
      await app.close();
    }
  });

  it('over a catch-all filter given to app.useGlobalFilters()', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [RedisLockModule.forRoot({ redis: SHARED_REDIS_URL, prefix })],
      controllers: [OrdersController],
      providers: [OrderService],
    }).compile();
    const app = moduleRef.createNestApplication({ logger: false });
    app.useGlobalFilters(new TeapotFilter());
    await app.init();
    try {
      await whileHeld(app, async () => {
        const response = await request(app.getHttpServer()).post('/orders/u1');
        expect(response.status).toBe(418);
      });
    } finally {
      await app.close();
    }
  });

  it("answerLockErrors: false leaves a service's busy lock to Nest (500)", async () => {
    const app = await createDecoratorApp({
      prefix,
      controllers: [OrdersController],
      providers: [OrderService],
      lock: { answerLockErrors: false },
    });
    try {
      await whileHeld(app, async () => {
        const response = await request(app.getHttpServer()).post('/orders/u1');
        expect(response.status).toBe(500);
      });
    } finally {
      await app.close();
    }
  });
});

@Controller()
class OrderHandlers {
  constructor(private readonly orders: OrderService) {}

  @MessagePattern('order.place')
  place(@Payload() data: { userId: string }) {
    return this.orders.place(data.userId);
  }
}

describe('a TCP microservice, nothing registered', () => {
  const prefix = uniquePrefix('default-answers-rpc');
  let app: INestMicroservice;
  let redis: Redis;
  let port: number;

  beforeAll(async () => {
    redis = redisClient();
    port = await freePort();
    const moduleRef = await Test.createTestingModule({
      imports: [RedisLockModule.forRoot({ redis: SHARED_REDIS_URL, prefix })],
      controllers: [OrderHandlers],
      providers: [OrderService],
    }).compile();
    app = moduleRef.createNestMicroservice<MicroserviceOptions>({
      transport: Transport.TCP,
      options: { host: '127.0.0.1', port },
      logger: false,
    });
    await app.listen();
  });

  afterAll(async () => {
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it("answers a service's busy lock with LockTransportError data", async () => {
    const client = ClientProxyFactory.create({
      transport: Transport.TCP,
      options: { host: '127.0.0.1', port },
    });
    try {
      const error = await whileHeld(app, () =>
        firstValueFrom(client.send('order.place', { userId: 'u1' })).then(
          () => undefined,
          (failure: unknown) => failure,
        ),
      );
      expect(error).toEqual({ status: 'error', error: 'LockNotAcquiredError', message: BUSY });
    } finally {
      await client.close();
    }
  });
});

@WebSocketGateway()
class OrdersGateway {
  constructor(private readonly orders: OrderService) {}

  @SubscribeMessage('order.place')
  place(@MessageBody() data: { userId: string }) {
    return this.orders.place(data.userId);
  }
}

describe('a WebSocket gateway, nothing registered', () => {
  const prefix = uniquePrefix('default-answers-ws');
  let app: INestApplication;
  let redis: Redis;

  beforeAll(async () => {
    redis = redisClient();
    const moduleRef = await Test.createTestingModule({
      imports: [RedisLockModule.forRoot({ redis: SHARED_REDIS_URL, prefix })],
      providers: [OrdersGateway, OrderService],
    }).compile();
    app = moduleRef.createNestApplication({ logger: false });
    await app.listen(0, '127.0.0.1');
  });

  afterAll(async () => {
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it("answers a service's busy lock with an exception event carrying the failure as data", async () => {
    const socket = io(await app.getUrl(), { transports: ['websocket'], forceNew: true });
    try {
      await new Promise<void>((resolve, reject) => {
        socket.once('connect', resolve);
        socket.once('connect_error', reject);
      });
      const answer = await whileHeld(
        app,
        () =>
          new Promise((resolve) => {
            socket.once('exception', (error: unknown) => resolve({ exception: error }));
            socket.emit('order.place', { userId: 'u1' }, (value: unknown) => resolve({ value }));
          }),
      );
      expect(answer).toEqual({
        exception: { status: 'error', error: 'LockNotAcquiredError', message: BUSY },
      });
    } finally {
      socket.disconnect();
    }
  });
});

@Resolver()
class OrderResolver {
  constructor(private readonly orders: OrderService) {}

  @Query(() => String)
  ping(): string {
    return 'pong';
  }

  @Mutation(() => String)
  async place(@Args('userId') userId: string): Promise<string> {
    return (await this.orders.place(userId)).userId;
  }
}

describe('GraphQL, nothing registered', () => {
  const prefix = uniquePrefix('default-answers-graphql');
  let app: INestApplication;
  let redis: Redis;

  beforeAll(async () => {
    redis = redisClient();
    app = await createGraphQLApp({
      lock: { redis: SHARED_REDIS_URL, prefix },
      resolvers: [OrderResolver],
      providers: [OrderService],
    });
  });

  afterAll(async () => {
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it("answers a service's busy lock with LOCK_BUSY, not INTERNAL_SERVER_ERROR", async () => {
    const answer = await whileHeld(app, () => gql(app, 'mutation { place(userId: "u1") }'));
    expect(answer.errors).toEqual([
      expect.objectContaining({
        message: BUSY,
        path: ['place'],
        extensions: { code: 'LOCK_BUSY', retryAfterMs: 1_000 },
      }),
    ]);
    expect(answer.text).not.toContain('order:');
  });
});
