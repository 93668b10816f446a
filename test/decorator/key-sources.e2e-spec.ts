/**
 * Where a route's key comes from: each placeholder from one source, fixed at bootstrap, read from
 * the value the handler receives (after pipes). A client cannot move a key by adding a field that
 * another source would have supplied; a request its pipes reject takes no lock; a placeholder that
 * names nothing, two parameters, or a route param the path does not have stops the app's start.
 */
import {
  Body,
  Controller,
  createParamDecorator,
  Get,
  Injectable,
  Param,
  ParseIntPipe,
  Post,
  Query,
  UseGuards,
  type CanActivate,
  type ExecutionContext,
  type INestApplication,
  type Type,
} from '@nestjs/common';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import type Redis from 'ioredis';
import request from 'supertest';
import { currentLock, Locked, RedisLockConfigError, RedisLockModule } from 'nestjs-redis-lock';
import { deleteKeys, redisClient, SHARED_REDIS_URL } from '../support/shared-redis';
import { Gate, waitFor } from '../support/time';
import { uniquePrefix } from '../support/unique-prefix';
import { keysUnder, leaseKey } from './decorator-app';

/** A wallet of 100 that two debits of 100 must not both draw from. */
class Ledger {
  balance = 100;
  paidOut = 0;
  entered = 0;
  /** The first debit to enter waits here, so a second one would overlap it. */
  gate = new Gate();

  async debit(amount: number): Promise<{ paid: number }> {
    const seen = this.balance;
    if (++this.entered === 1) await this.gate.opened;
    if (seen < amount) return { paid: 0 };
    this.balance = seen - amount;
    this.paidOut += amount;
    return { paid: amount };
  }

  reset(): void {
    Object.assign(this, { balance: 100, paidOut: 0, entered: 0, gate: new Gate() });
  }
}

const ledger = new Ledger();

/** Sets `request.user` as an auth guard would, from a header the test controls. */
@Injectable()
class FakeAuthGuard implements CanActivate {
  canActivate(context: ExecutionContext): boolean {
    const req = context
      .switchToHttp()
      .getRequest<{ headers: Record<string, string>; user?: unknown }>();
    req.user = { walletId: req.headers['x-wallet'] };
    return true;
  }
}

/** A custom parameter decorator reading a field of `request.user`. */
const UserField = createParamDecorator((field: string, context: ExecutionContext) => {
  const req = context.switchToHttp().getRequest<{ user: Record<string, unknown> }>();
  return req.user[field];
});

/** Slow handlers wait here until the test has its second answer. */
let held = new Gate();

@Controller()
class WalletController {
  /** The wallet comes from the body; `?userId=` is a client's attempt to pick another key. */
  @Post('wallets/debit')
  @Locked('wallet:<userId>')
  async debit(
    @Body('userId') userId: string,
    @Body('amount') amount: number,
  ): Promise<Promise<{ paid: number }>> {
    void userId;
    return ledger.debit(amount);
  }

  /** The wallet comes from `request.user`, set by a guard. */
  @Post('me/debit')
  @UseGuards(FakeAuthGuard)
  @Locked('wallet:<walletId>')
  async debitMine(@UserField('walletId') walletId: string): Promise<Promise<{ paid: number }>> {
    void walletId;
    return ledger.debit(100);
  }

  /** `/u/042` and `/u/42` are one user once ParseIntPipe has run. */
  @Get('u/:id')
  @Locked('u:<id>')
  async user(@Param('id', ParseIntPipe) id: number): Promise<{ id: number; key?: string }> {
    const key = currentLock()?.key;
    await held.opened;
    return { id, key };
  }

  /** An explicit source read from the handler's piped parameter. */
  @Get('explicit/:id')
  @Locked('e:<params.id>')
  async explicit(@Param('id', ParseIntPipe) id: number): Promise<{ key?: string }> {
    void id;
    return { key: currentLock()?.key };
  }

  /** A bare name answering to the TypeScript name of a parameter bound with another name. */
  @Get('renamed/:userId')
  @Locked('r:<id>:<userId>')
  async renamed(@Param('userId') id: string): Promise<{ key?: string }> {
    void id;
    return { key: currentLock()?.key };
  }
}

async function httpApp(prefix: string, fastify = false): Promise<INestApplication> {
  const moduleRef = await Test.createTestingModule({
    imports: [RedisLockModule.forRoot({ redis: SHARED_REDIS_URL, prefix })],
    controllers: [WalletController],
  }).compile();
  const app = fastify
    ? moduleRef.createNestApplication(new FastifyAdapter(), { logger: false })
    : moduleRef.createNestApplication({ logger: false });
  await app.listen(0, '127.0.0.1');
  return app;
}

describe.each([
  ['Express', false],
  ['Fastify', true],
])('route keys come from one source, after pipes (%s)', (_name, fastify) => {
  const prefix = uniquePrefix(`key-sources-${fastify ? 'fastify' : 'express'}`);
  let app: INestApplication;
  let redis: Redis;

  beforeAll(async () => {
    redis = redisClient();
    app = await httpApp(prefix, fastify);
  });

  afterAll(async () => {
    held.release();
    ledger.gate.release();
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  beforeEach(() => ledger.reset());

  it("a client's ?userId= cannot move the key of a handler keyed on body.userId", async () => {
    const server = app.getHttpServer();
    const first = request(server)
      .post('/wallets/debit?userId=x1')
      .send({ userId: 'w1', amount: 100 })
      .then();
    await waitFor(() => ledger.entered === 1, 3_000, 5);
    const second = await request(server)
      .post('/wallets/debit?userId=x2')
      .send({ userId: 'w1', amount: 100 });
    ledger.gate.release();
    expect((await first).status).toBe(201);
    expect(second.status).toBe(409);
    expect(ledger.paidOut).toBe(100);
    expect(ledger.balance).toBe(0);
  });

  it("a client's ?walletId= cannot move the key of a handler keyed on a guard-set user", async () => {
    const server = app.getHttpServer();
    const first = request(server).post('/me/debit?walletId=x1').set('x-wallet', 'w2').then();
    await waitFor(() => ledger.entered === 1, 3_000, 5);
    const second = await request(server).post('/me/debit?walletId=x2').set('x-wallet', 'w2');
    ledger.gate.release();
    expect((await first).status).toBe(201);
    expect(second.status).toBe(409);
    expect(ledger.paidOut).toBe(100);
  });

  it('/u/042 and /u/42 are one lock under ParseIntPipe, keyed u:42', async () => {
    held = new Gate();
    const server = app.getHttpServer();
    const first = request(server).get('/u/042').then();
    await waitFor(async () => (await redis.exists(leaseKey(prefix, 'u:42'))) === 1, 3_000, 5);
    const second = await request(server).get('/u/42');
    held.release();
    expect((await first).body).toEqual({ id: 42, key: 'u:42' });
    expect(second.status).toBe(409);
  });

  it('takes no lock for a request its pipes reject: nothing is written to Redis', async () => {
    const response = await request(app.getHttpServer()).get('/u/abc');
    expect(response.status).toBe(400);
    expect(response.body.message).toMatch(/numeric string is expected/);
    expect(await keysUnder(redis, `${prefix}{u:abc`)).toEqual([]);
  });

  it('reads an explicit source from the parameter that receives it, after its pipe', async () => {
    const response = await request(app.getHttpServer()).get('/explicit/007');
    expect(response.body).toEqual({ key: 'e:7' });
  });

  it("answers to a parameter's TypeScript name and to its decorator's name", async () => {
    const response = await request(app.getHttpServer()).get('/renamed/u-5?id=not-this');
    expect(response.body).toEqual({ key: 'r:u-5:u-5' });
  });
});

/** Resolves the error `app.init()` rejects with for `controller`, or undefined if it boots. */
async function bootError(...controllers: Type[]): Promise<unknown> {
  const moduleRef = await Test.createTestingModule({
    imports: [RedisLockModule.forRoot({ redis: SHARED_REDIS_URL, prefix: uniquePrefix('boot') })],
    controllers,
  }).compile();
  const app = moduleRef.createNestApplication({ logger: false });
  try {
    await app.init();
    return undefined;
  } catch (error) {
    return error;
  } finally {
    await app.close();
  }
}

describe('a route placeholder that cannot be resolved stops the bootstrap', () => {
  it('a name that matches two parameters', async () => {
    @Controller()
    class Ambiguous {
      @Post('a/:userId')
      @Locked('a:<userId>')
      async create(@Param('userId') id: string, @Body('id') userId: string): Promise<string> {
        return id + userId;
      }
    }
    const error = await bootError(Ambiguous);
    expect(error).toBeInstanceOf(RedisLockConfigError);
    expect((error as Error).message).toContain('Ambiguous.create');
    expect((error as Error).message).toMatch(
      /<userId> matches 2 parameters: id \(@Param\('userId'\)\), userId \(@Body\('id'\)\)/,
    );
  });

  it('a bare name that matches nothing, listing what it could have meant', async () => {
    @Controller()
    class Unknown {
      @Post('b/:userId')
      @Locked('b:<userId>')
      async create(@Body() dto: { userId: string }): Promise<string> {
        return dto.userId;
      }
    }
    const error = await bootError(Unknown);
    expect(error).toBeInstanceOf(RedisLockConfigError);
    const message = (error as Error).message;
    expect(message).toContain('Unknown.create');
    expect(message).toContain('<userId> matches no parameter');
    expect(message).toContain('<params.userId>');
    expect(message).toContain('<body.userId>');
    expect(message).toContain('<dto.userId>');
  });

  it('<params.userid> on a :userId route', async () => {
    @Controller('c')
    class Typo {
      @Post(':userId')
      @Locked('c:<params.userid>')
      async create(@Param('userId') userId: string): Promise<string> {
        return userId;
      }
    }
    const error = await bootError(Typo);
    expect(error).toBeInstanceOf(RedisLockConfigError);
    expect((error as Error).message).toContain('Typo.create');
    expect((error as Error).message).toMatch(/<params\.userid>.*route params: userId/);
  });

  it('a route param one of the controllers inheriting the handler lacks', async () => {
    abstract class Payments {
      @Post('pay')
      @Locked('acct:<params.id>')
      async pay(): Promise<string> {
        return 'paid';
      }
    }
    @Controller('a/:id')
    class WithId extends Payments {}
    @Controller('b')
    class WithoutId extends Payments {}
    // Each controller's path is checked, not only the first one the handler was seen under.
    const error = await bootError(WithId, WithoutId);
    expect(error).toBeInstanceOf(RedisLockConfigError);
    expect((error as Error).message).toMatch(/<params\.id>/);
    await expect(bootError(WithId)).resolves.toBeUndefined();
  });

  it('boots when every placeholder has one source', async () => {
    @Controller('d')
    class Fine {
      @Post(':userId')
      @Locked('d:<userId>:<body.orderId>:<q>')
      async create(@Param('userId') id: string, @Query('q') q: string): Promise<string> {
        return id + q;
      }
    }
    await expect(bootError(Fine)).resolves.toBeUndefined();
  });
});
