/**
 * `@Locked([...])` on an HTTP route: every key from the request, held together; 409 + Retry-After
 * (and nothing taken) while any one of them is held elsewhere, with no request value in the body;
 * 400 for a key that cannot be built; each template checked at bootstrap like a single one.
 */
import { Body, Controller, Param, Post, type INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import {
  currentLock,
  Locked,
  LockService,
  RedisLockConfigError,
  RedisLockModule,
  type MultiLockHandle,
} from 'nestjs-redis-lock';
import { deleteKeys, redisClient, SHARED_REDIS_URL } from '../support/shared-redis';
import { uniquePrefix } from '../support/unique-prefix';
import { createDecoratorApp, leaseKey } from '../decorator/decorator-app';

class TransferDto {
  from!: string;
  to!: string;
}

@Controller('accounts')
class TransfersController {
  @Post(':from/transfers')
  @Locked(['account:<from>', 'account:<body.to>'])
  async transfer(@Param('from') from: string, @Body() dto: TransferDto) {
    const lock = currentLock() as MultiLockHandle;
    return { from, to: dto.to, keys: lock.keys, fences: Object.keys(lock.fences).length };
  }
}

const prefix = uniquePrefix('multi-route');
const redis = redisClient();
let app: INestApplication;

beforeAll(async () => {
  app = await createDecoratorApp({ prefix, controllers: [TransfersController] });
});

afterAll(async () => {
  await app?.close();
  await deleteKeys(redis, prefix);
  await redis.quit();
});

describe('@Locked([...]) on a route', () => {
  it('holds every key while the handler runs, and releases them after', async () => {
    const response = await request(app.getHttpServer())
      .post('/accounts/ann/transfers')
      .send({ to: 'bob' })
      .expect(201);
    expect(response.body).toEqual({
      from: 'ann',
      to: 'bob',
      keys: ['account:ann', 'account:bob'],
      fences: 2,
    });
    expect(await redis.exists(leaseKey(prefix, 'account:ann'))).toBe(0);
  });

  it('answers 409 with Retry-After while one key is held, taking none of them', async () => {
    const held = await app.get(LockService).acquire('account:bob-2');
    try {
      const response = await request(app.getHttpServer())
        .post('/accounts/ann-2/transfers')
        .send({ to: 'bob-2' })
        .expect(409);
      expect(response.headers['retry-after']).toBe('1');
      expect(JSON.stringify(response.body)).not.toMatch(/ann-2|bob-2/);
      expect(await redis.exists(leaseKey(prefix, 'account:ann-2'))).toBe(0);
    } finally {
      await held.release();
    }
    await request(app.getHttpServer())
      .post('/accounts/ann-2/transfers')
      .send({ to: 'bob-2' })
      .expect(201);
  });

  it('answers 400 when one of the keys cannot be built (nothing taken)', async () => {
    await request(app.getHttpServer()).post('/accounts/ann-3/transfers').send({}).expect(400);
    expect(await redis.exists(leaseKey(prefix, 'account:ann-3'))).toBe(0);
  });
});

describe('@Locked([...]) at bootstrap and class definition', () => {
  it('checks every template: a placeholder that resolves to nothing stops the start', async () => {
    @Controller()
    class Typo {
      @Post('t/:from')
      @Locked(['account:<from>', 'account:<params.too>'])
      async transfer(@Param('from') from: string) {
        return from;
      }
    }
    const moduleRef = await Test.createTestingModule({
      imports: [RedisLockModule.forRoot({ redis: SHARED_REDIS_URL, prefix })],
      controllers: [Typo],
    }).compile();
    const typoApp = moduleRef.createNestApplication({ logger: false });
    const error = await typoApp.init().then(
      () => undefined,
      (e: unknown) => e,
    );
    await typoApp.close();
    expect(error).toBeInstanceOf(RedisLockConfigError);
    expect((error as Error).message).toContain('<params.too>');
  });

  it('refuses an empty array, and options asking for another kind of lock', () => {
    expect(() => Locked([])).not.toThrow(); // refused where it is applied, naming the method
    class Empty {
      async run(): Promise<void> {}
    }
    const descriptor = Object.getOwnPropertyDescriptor(Empty.prototype, 'run')!;
    expect(() => Locked([])(Empty.prototype, 'run', descriptor)).toThrow(RedisLockConfigError);
    expect(() => Locked(['a', 'b'], { permits: 2 })).toThrow(RedisLockConfigError);
  });
});
