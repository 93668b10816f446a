/**
 * Typos a newcomer makes, and what the bootstrap tells them: a misspelt option gets the option it
 * likely meant (`url` → `redis`, never `ttl`), a misspelt placeholder on a route gets the handler
 * parameter it likely meant first, and a misspelt placeholder on a provider method stops the app
 * from starting with a configuration error, as on a route — `LockKeyError` stays the runtime 400.
 */
import { Controller, Injectable, Param, Post } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Locked, LockService, RedisLockConfigError, RedisLockModule } from 'nestjs-redis-lock';
import { SHARED_REDIS_URL } from '../support/shared-redis';
import { uniquePrefix } from '../support/unique-prefix';

const prefix = uniquePrefix('key-typos');

/** What bootstrapping a module with these providers and controllers throws. */
async function bootError(metadata: { providers?: never[]; controllers?: never[] }) {
  const moduleRef = await Test.createTestingModule({
    imports: [RedisLockModule.forRoot({ redis: SHARED_REDIS_URL, prefix, startupCheck: 'off' })],
    ...metadata,
  }).compile();
  const app = moduleRef.createNestApplication({ logger: false });
  try {
    await app.init();
  } catch (error) {
    return error as Error;
  } finally {
    await app.close().catch(() => undefined);
  }
  throw new Error('expected the bootstrap to fail');
}

describe('a misspelt module option', () => {
  // forRoot's options are validated as `new LockService()` validates them, before connecting.
  it.each(['url', 'host', 'port'])('suggests `redis` for `%s`, not `ttl`', (name) => {
    const build = () => new LockService({ [name]: 'redis://127.0.0.1:6379' });
    expect(build).toThrow(RedisLockConfigError);
    expect(build).toThrow(/`[a-z]+` is not an option; did you mean `redis`\?/);
  });

  it('still suggests the option a real typo meant', () => {
    expect(() => new LockService({ tll: 1 } as never)).toThrow(/did you mean `ttl`\?/);
    expect(() => new LockService({ prefx: 'a:' } as never)).toThrow(/did you mean `prefix`\?/);
  });
});

describe('a misspelt placeholder', () => {
  it('on a route: suggests the handler parameter first', async () => {
    @Controller('orders')
    class Orders {
      @Post(':userId')
      @Locked('order:<usrId>')
      async place(@Param('userId') userId: string): Promise<string> {
        return userId;
      }
    }
    const error = await bootError({ controllers: [Orders] as never[] });
    expect(error).toBeInstanceOf(RedisLockConfigError);
    expect(error.message).toMatch(/Did you mean <userId>, /);
  });

  it('on a provider method: fails the bootstrap with RedisLockConfigError, suggesting the parameter', async () => {
    @Injectable()
    class Orders {
      @Locked('order:<usrId>')
      async place(userId: string): Promise<string> {
        return userId;
      }
    }
    const error = await bootError({ providers: [Orders] as never[] });
    expect(error).toBeInstanceOf(RedisLockConfigError);
    expect(error.message).toContain('<usrId>');
    expect(error.message).toMatch(/did you mean <userId>\?/i);
  });
});
