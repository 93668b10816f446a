/**
 * `@Locked` locks through the LockService its provider's module sees — the one Nest would inject
 * into that provider — never another module's: two scoped RedisLockModules on two Redis servers
 * each lock their own providers, two applications in one process each use their own, and a second
 * copy of the library (the dual ESM/CJS package hazard) still finds the module's service.
 */
import {
  Controller,
  Get,
  Injectable,
  Module,
  Param,
  Scope,
  type INestApplication,
  type Type,
} from '@nestjs/common';
import { Test } from '@nestjs/testing';
import request from 'supertest';
import { Locked, LockService, RedisLockConfigError, RedisLockModule } from 'nestjs-redis-lock';
import { SHARED_REDIS_URL } from '../support/shared-redis';
import { startRedis, stopAllRedis, type RedisServer } from '../support/redis-server';
import { uniquePrefix } from '../support/unique-prefix';

/** Which lock services hold `job:<id>` while the method runs. */
interface Seen {
  ownHeld: boolean;
  otherHeld: boolean;
}

/** A job service: it checks, under its lock, which module's service holds the key. */
@Injectable()
class JobsA {
  other?: LockService;
  constructor(readonly locks: LockService) {}

  @Locked('job:<id>')
  async run(id: string): Promise<Seen> {
    return {
      ownHeld: await this.locks.isLocked(`job:${id}`),
      otherHeld: (await this.other?.isLocked(`job:${id}`)) ?? false,
    };
  }
}

/** The same in module B: a class of its own, to be found by type in either module. */
@Injectable()
class JobsB extends JobsA {}

/** A route in each module: its interceptor, too, is the module's own. */
function jobsController(path: string): Type {
  @Controller(path)
  class JobsController {
    constructor(private readonly locks: LockService) {}

    @Get(':id')
    @Locked('route:<id>')
    async get(@Param('id') id: string): Promise<boolean> {
      return this.locks.isLocked(`route:${id}`);
    }
  }
  return JobsController;
}

describe('@Locked locks through the LockService of its own module', () => {
  let servers: [RedisServer, RedisServer];

  beforeAll(async () => {
    servers = await Promise.all([startRedis(), startRedis()]);
  });

  afterAll(() => stopAllRedis());

  it('two scoped modules on two Redis servers: each provider locks on its own', async () => {
    const prefix = uniquePrefix('scoped-modules');
    @Module({
      imports: [
        RedisLockModule.forRoot({ redis: servers[0].url, prefix: `${prefix}a:`, isGlobal: false }),
      ],
      providers: [JobsA],
      controllers: [jobsController('a')],
      exports: [JobsA],
    })
    class ModuleA {}
    @Module({
      imports: [
        RedisLockModule.forRoot({ redis: servers[1].url, prefix: `${prefix}b:`, isGlobal: false }),
      ],
      providers: [JobsB],
      controllers: [jobsController('b')],
      exports: [JobsB],
    })
    class ModuleB {}

    const app = await bootstrap([ModuleA, ModuleB]);
    try {
      const a = app.get(JobsA);
      const b = app.get(JobsB);
      expect(a.locks).not.toBe(b.locks);
      a.other = b.locks;
      b.other = a.locks;
      await expect(a.run('1')).resolves.toEqual({ ownHeld: true, otherHeld: false });
      await expect(b.run('1')).resolves.toEqual({ ownHeld: true, otherHeld: false });
      for (const path of ['/a/1', '/b/1']) {
        const response = await request(app.getHttpServer()).get(path);
        expect([path, response.text]).toEqual([path, 'true']);
      }
    } finally {
      await app.close();
    }
  });

  it.each([
    ['a singleton', Scope.DEFAULT],
    ['a request-scoped', Scope.REQUEST],
  ])(
    '%s provider whose module does not import a scoped RedisLockModule: bootstrap names it',
    async (_kind, scope) => {
      const prefix = uniquePrefix('unimported');
      @Module({
        imports: [RedisLockModule.forRoot({ redis: servers[0].url, prefix, isGlobal: false })],
      })
      class LockingModule {}
      @Injectable({ scope })
      class Orphan {
        @Locked('job:<id>')
        async run(id: string): Promise<string> {
          return id;
        }
      }
      @Module({ providers: [Orphan] })
      class OrphanModule {}

      const moduleRef = await Test.createTestingModule({
        imports: [LockingModule, OrphanModule],
      }).compile();
      const app = moduleRef.createNestApplication({ logger: false });
      const error = await app.init().then(
        () => undefined,
        (reason: unknown) => reason,
      );
      await app.close();
      expect(error).toBeInstanceOf(RedisLockConfigError);
      expect((error as Error).message).toMatch(
        /^Orphan .*module OrphanModule .*import RedisLockModule/,
      );
    },
  );

  it('two applications in one process each lock through their own module', async () => {
    const prefix = uniquePrefix('two-apps');
    const first = await bootstrap([
      RedisLockModule.forRoot({ redis: servers[0].url, prefix: `${prefix}1:` }),
      { module: class First {}, providers: [JobsA] },
    ]);
    const second = await bootstrap([
      RedisLockModule.forRoot({ redis: servers[1].url, prefix: `${prefix}2:` }),
      { module: class Second {}, providers: [JobsA] },
    ]);
    try {
      const one = first.get(JobsA, { strict: false });
      const two = second.get(JobsA, { strict: false });
      one.other = two.locks;
      two.other = one.locks;
      await expect(one.run('1')).resolves.toEqual({ ownHeld: true, otherHeld: false });
      await expect(two.run('1')).resolves.toEqual({ ownHeld: true, otherHeld: false });
    } finally {
      await first.close();
      await second.close();
    }
  });

  it('a second copy of the library finds the module of the first, on providers and routes', async () => {
    // Another copy of the package's modules (as an ESM and a CJS build would be), over the same
    // Nest: its classes, symbols and module-level state are all its own.
    const shared = ['@nestjs/common', '@nestjs/core', 'rxjs', 'ioredis'].map(
      (name) => [name, jest.requireActual<object>(name)] as const,
    );
    let copy!: typeof import('nestjs-redis-lock');
    jest.isolateModules(() => {
      for (const [name, loaded] of shared) jest.doMock(name, () => loaded);
      copy = jest.requireActual('nestjs-redis-lock');
    });
    expect(copy.Locked).not.toBe(Locked);
    const prefix = uniquePrefix('second-copy');

    @Injectable()
    class CopyJobs {
      constructor(readonly locks: LockService) {}
      @copy.Locked('job:<id>')
      async run(id: string): Promise<boolean> {
        return this.locks.isLocked(`job:${id}`);
      }
    }
    @Controller('copy')
    class CopyController {
      constructor(private readonly locks: LockService) {}
      @Get(':id')
      @copy.Locked('route:<id>')
      async get(@Param('id') id: string): Promise<boolean> {
        return this.locks.isLocked(`route:${id}`);
      }
    }
    const app = await bootstrap([
      RedisLockModule.forRoot({ redis: SHARED_REDIS_URL, prefix }),
      { module: class CopyModule {}, providers: [CopyJobs], controllers: [CopyController] },
    ]);
    try {
      await expect(app.get(CopyJobs, { strict: false }).run('1')).resolves.toBe(true);
      const response = await request(app.getHttpServer()).get('/copy/1');
      expect(response.text).toBe('true');
    } finally {
      await app.close();
    }
  });
});

async function bootstrap(
  imports: NonNullable<Parameters<typeof Test.createTestingModule>[0]['imports']>,
): Promise<INestApplication> {
  const moduleRef = await Test.createTestingModule({ imports }).compile();
  const app = moduleRef.createNestApplication({ logger: false });
  await app.init();
  return app;
}
