/**
 * `@Locked(fn)` where the key function returns an array: every key held together (all or none),
 * exactly as `@Locked([...])` holds them — on a provider method and on an HTTP route. Duplicates
 * collapse; an empty array, a bad key in it or a result that is neither a key nor an array of keys
 * is refused with `LockKeyError` at the call (400 on a route), with nothing run or written.
 */
import { Body, Controller, type ExecutionContext, Injectable, Post } from '@nestjs/common';
import type { INestApplication } from '@nestjs/common';
import request from 'supertest';
import {
  currentLock,
  Locked,
  LockKeyError,
  LockNotAcquiredError,
  LockService,
  RedisLockConfigError,
  type MultiLockHandle,
} from 'nestjs-redis-lock';
import { deleteKeys, redisClient } from '../support/shared-redis';
import { uniquePrefix } from '../support/unique-prefix';
import { createDecoratorApp, keysUnder, leaseKey } from '../decorator/decorator-app';

interface Held {
  keys: readonly string[];
  fences: number;
}
const held = (): Held => {
  const lock = currentLock() as MultiLockHandle;
  return { keys: lock.keys, fences: Object.keys(lock.fences).length };
};

@Injectable()
class Accounts {
  runs = 0;

  @Locked((from: string, to: string) => [`account:${from}`, `account:${to}`])
  async transfer(from: string, to: string): Promise<Held> {
    this.runs++;
    void [from, to];
    return held();
  }

  /** Returns whatever it is given as its key(s): the refusals below. */
  @Locked((keys: unknown) => keys as string[])
  async anyKeys(keys: unknown): Promise<void> {
    void keys;
    this.runs++;
  }

  @Locked((a: string, b: string) => [a, b], { permits: 2 })
  async withPermits(a: string, b: string): Promise<void> {
    void [a, b];
    this.runs++;
  }
}

class TransferDto {
  from!: string;
  to!: string;
}

@Controller('fn-transfers')
class TransfersController {
  @Post()
  @Locked((_context: ExecutionContext, [dto]: [TransferDto]) => [
    `account:${dto.from}`,
    `account:${dto.to}`,
  ])
  async create(@Body() dto: TransferDto): Promise<Held> {
    void dto;
    return held();
  }

  @Post('none')
  @Locked(() => [])
  async none(): Promise<string> {
    return 'never';
  }
}

const prefix = uniquePrefix('multi-fn');
const redis = redisClient();
let app: INestApplication;
let accounts: Accounts;
let locks: LockService;

beforeAll(async () => {
  app = await createDecoratorApp({
    prefix,
    providers: [Accounts],
    controllers: [TransfersController],
  });
  accounts = app.get(Accounts);
  locks = app.get(LockService);
});

beforeEach(() => {
  accounts.runs = 0;
});

afterAll(async () => {
  await app?.close();
  await deleteKeys(redis, prefix);
  await redis.quit();
});

describe('@Locked(fn) returning several keys, on a provider method', () => {
  it('holds every key while the method runs, each with its fence, and releases them after', async () => {
    await expect(accounts.transfer('bob', 'ann')).resolves.toEqual({
      keys: ['account:ann', 'account:bob'],
      fences: 2,
    });
    expect(await redis.exists(leaseKey(prefix, 'account:ann'))).toBe(0);
    expect(await redis.exists(leaseKey(prefix, 'account:bob'))).toBe(0);
  });

  it('takes none of them while one is held elsewhere', async () => {
    const holder = await locks.acquire('account:bob-2');
    try {
      const attempt = accounts.transfer('ann-2', 'bob-2');
      await expect(attempt).rejects.toBeInstanceOf(LockNotAcquiredError);
      await expect(attempt).rejects.toMatchObject({
        key: 'account:bob-2',
        keys: ['account:ann-2', 'account:bob-2'],
      });
      expect(accounts.runs).toBe(0);
      expect(await redis.exists(leaseKey(prefix, 'account:ann-2'))).toBe(0);
    } finally {
      await holder.release();
    }
    await expect(accounts.transfer('ann-2', 'bob-2')).resolves.toMatchObject({ fences: 2 });
  });

  it('collapses duplicates into one key', async () => {
    await expect(accounts.transfer('same', 'same')).resolves.toEqual({
      keys: ['account:same'],
      fences: 1,
    });
  });

  it.each([
    ['an empty array', [], /returned an empty array/],
    ['an array holding an empty key', ['fn:a', ''], /returned an array holding an empty string/],
    ['an array holding no string', ['fn:a', undefined], /returned an array holding undefined/],
    ['an array holding an object', ['fn:a', { id: 1 }], /returned an array holding an object/],
    ['an array holding a key too long', ['fn:a', 'k'.repeat(600)], /over the limit of 512/],
    ['a number', 7, /on Accounts.anyKeys returned a number/],
    ['an object', { key: 'fn:a' }, /on Accounts.anyKeys returned an object/],
  ])('refuses %s with LockKeyError, running nothing and writing nothing', async (_, keys, why) => {
    const attempt = accounts.anyKeys(keys);
    await expect(attempt).rejects.toBeInstanceOf(LockKeyError);
    await expect(attempt).rejects.toThrow(why);
    expect(accounts.runs).toBe(0);
    expect(await keysUnder(redis, `${prefix}{fn:`)).toEqual([]);
  });

  it('refuses options that ask for another kind of lock, at the call', async () => {
    await expect(accounts.withPermits('fn:p', 'fn:q')).rejects.toBeInstanceOf(RedisLockConfigError);
    expect(accounts.runs).toBe(0);
    expect(await keysUnder(redis, `${prefix}{fn:`)).toEqual([]);
  });
});

describe('@Locked(fn) returning several keys, on a route', () => {
  it('holds every key built from the piped arguments', async () => {
    const response = await request(app.getHttpServer())
      .post('/fn-transfers')
      .send({ from: 'cat', to: 'dan' })
      .expect(201);
    expect(response.body).toEqual({ keys: ['account:cat', 'account:dan'], fences: 2 });
  });

  it('answers 409 while one key is held, taking none, with no request value in the body', async () => {
    const holder = await locks.acquire('account:dan-2');
    try {
      const response = await request(app.getHttpServer())
        .post('/fn-transfers')
        .send({ from: 'cat-2', to: 'dan-2' })
        .expect(409);
      expect(response.headers['retry-after']).toBeDefined();
      expect(JSON.stringify(response.body)).not.toMatch(/cat-2|dan-2/);
      expect(await redis.exists(leaseKey(prefix, 'account:cat-2'))).toBe(0);
    } finally {
      await holder.release();
    }
  });

  it('answers 400 for an empty array', async () => {
    await request(app.getHttpServer()).post('/fn-transfers/none').expect(400);
  });
});
