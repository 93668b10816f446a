/**
 * `@Locked` next to decorators that wrap the method, in either order: a wrapper that copies the
 * method's metadata (as OpenTelemetry `@Span` helpers do) and `@UseInterceptors(FileInterceptor())`
 * with a multipart body. The route takes its lock once per request, with the key built from the
 * request, and the handler runs under it.
 */
import {
  Body,
  Controller,
  Injectable,
  Param,
  Post,
  UploadedFile,
  UseInterceptors,
  type INestApplication,
} from '@nestjs/common';
import { FileInterceptor } from '@nestjs/platform-express';
import type Redis from 'ioredis';
import request from 'supertest';
import { currentLock, Locked, LockService } from 'nestjs-redis-lock';
import { deleteKeys, redisClient } from '../support/shared-redis';
import { Gate, waitFor } from '../support/time';
import { uniquePrefix } from '../support/unique-prefix';
import { createDecoratorApp } from './decorator-app';

/** The methods each `Traced` wrapper was called for, in call order. */
const traced: string[] = [];

/**
 * Wraps the method and copies its metadata onto the wrapper, as tracing decorators do: above
 * `@Locked`, Nest calls this wrapper, not `@Locked`'s.
 */
function Traced(): MethodDecorator {
  return (_target, propertyKey, descriptor) => {
    const original = descriptor.value as unknown as (...args: unknown[]) => unknown;
    const wrapped = function (this: unknown, ...args: unknown[]): unknown {
      traced.push(String(propertyKey));
      return original.apply(this, args);
    };
    for (const key of Reflect.getOwnMetadataKeys(original)) {
      Reflect.defineMetadata(key, Reflect.getOwnMetadata(key, original), wrapped);
    }
    (descriptor as TypedPropertyDescriptor<unknown>).value = wrapped;
  };
}

const gate = new Gate();

/** What the handler saw: the lock it ran under. */
interface Seen {
  lock?: string;
  file?: string;
  userId: string;
}

@Controller('vouchers')
class VoucherController {
  @Post(':voucherId/orders')
  @Traced()
  @Locked('voucher:<voucherId>:user:<body.userId>')
  async tracedAbove(
    @Param('voucherId') voucherId: string,
    @Body() dto: { userId: string },
  ): Promise<Seen> {
    void voucherId;
    return { lock: currentLock()?.key, userId: dto.userId };
  }

  @Post(':voucherId/orders-below')
  @Locked('voucher:<voucherId>:user:<body.userId>')
  @Traced()
  async tracedBelow(
    @Param('voucherId') voucherId: string,
    @Body() dto: { userId: string },
  ): Promise<Seen> {
    void voucherId;
    return { lock: currentLock()?.key, userId: dto.userId };
  }

  /** Not re-entrant: an inner wrapper that locked again would wait for the route's own lock. */
  @Post('strict/:userId')
  @Traced()
  @Locked('strict:<userId>', { reentrant: false, wait: 300 })
  async strict(@Param('userId') userId: string): Promise<Seen> {
    return { lock: currentLock()?.key, userId };
  }
}

@Injectable()
class OrderService {
  @Traced()
  @Locked('order:<userId>', { reentrant: false, wait: 300 })
  async place(userId: string): Promise<Seen> {
    return { lock: currentLock()?.key, userId };
  }
}

@Controller('uploads')
class UploadController {
  constructor(private readonly orders: OrderService) {}

  @Post('above')
  @UseInterceptors(FileInterceptor('file'))
  @Locked('upload:<body.userId>')
  async above(
    @UploadedFile() file: { originalname: string },
    @Body() body: { userId: string },
  ): Promise<Seen> {
    await gate.opened;
    return { lock: currentLock()?.key, file: file.originalname, userId: body.userId };
  }

  @Post('below')
  @Locked('upload:<body.userId>')
  @UseInterceptors(FileInterceptor('file'))
  async below(
    @UploadedFile() file: { originalname: string },
    @Body() body: { userId: string },
  ): Promise<Seen> {
    await gate.opened;
    return { lock: currentLock()?.key, file: file.originalname, userId: body.userId };
  }

  @Post('service/:userId')
  service(@Param('userId') userId: string): Promise<Seen> {
    return this.orders.place(userId);
  }
}

describe.each([
  ['Express', false],
  ['Fastify', true],
])('@Locked with wrapping decorators (%s)', (_server, fastify) => {
  const prefix = uniquePrefix('decorator-wrapping');
  let app: INestApplication;
  let locks: LockService;
  let redis: Redis;

  beforeAll(async () => {
    redis = redisClient();
    app = await createDecoratorApp({
      prefix,
      controllers: [VoucherController, UploadController],
      providers: [OrderService],
      listen: true,
      fastify,
    });
    locks = app.get(LockService);
  });

  afterAll(async () => {
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it.each([
    ['above', 'orders'],
    ['below', 'orders-below'],
  ])(
    'keys the route from the request with a metadata-copying wrapper %s @Locked',
    async (_order, path) => {
      traced.length = 0;
      const response = await request(app.getHttpServer())
        .post(`/vouchers/v-1/${path}`)
        .send({ userId: 'u-1' });
      expect(response.status).toBe(201);
      expect(response.body).toEqual({ lock: 'voucher:v-1:user:u-1', userId: 'u-1' });
      expect(traced).toHaveLength(1);
      expect(await locks.isLocked('voucher:v-1:user:u-1')).toBe(false);
    },
  );

  it('runs a non-re-entrant route with a wrapper above under its one lock, not against itself', async () => {
    const response = await request(app.getHttpServer()).post('/vouchers/strict/u-2');
    expect(response.status).toBe(201);
    expect(response.body).toEqual({ lock: 'strict:u-2', userId: 'u-2' });
    expect(await locks.isLocked('strict:u-2')).toBe(false);
  });

  it('locks a wrapped, non-re-entrant provider method once', async () => {
    const response = await request(app.getHttpServer()).post('/uploads/service/u-3');
    expect(response.status).toBe(201);
    expect(response.body).toEqual({ lock: 'order:u-3', userId: 'u-3' });
  });

  // FileInterceptor is multer's, which Express serves.
  if (fastify) return;

  it.each(['above', 'below'])(
    'keys a multipart upload from its parsed body with FileInterceptor %s @Locked',
    async (order) => {
      const upload = () =>
        request(app.getHttpServer())
          .post(`/uploads/${order}`)
          .field('userId', `u-${order}`)
          .attach('file', Buffer.from('hello'), 'hello.txt')
          .then((response) => response);
      const first = upload();
      await waitFor(() => locks.isLocked(`upload:u-${order}`), 5_000, 5);
      // While the first upload holds the key, a second one for the same user is busy.
      const second = await upload();
      expect(second.status).toBe(409);
      gate.release();
      const done = await first;
      expect(done.status).toBe(201);
      expect(done.body).toEqual({
        lock: `upload:u-${order}`,
        file: 'hello.txt',
        userId: `u-${order}`,
      });
      expect(await locks.isLocked(`upload:u-${order}`)).toBe(false);
    },
  );
});
