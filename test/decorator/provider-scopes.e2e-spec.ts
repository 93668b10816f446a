/**
 * `@Locked` works on every kind of provider Nest creates, whenever it creates it: request-scoped
 * (declared, or by depending on `REQUEST`), durable, transient, in a lazily loaded module, in a
 * `compile()`-only testing module, through a subclass that overrides the method and calls
 * `super`, and an instance a factory returns. `@Locked` on a static method is refused at once.
 */
import {
  Controller,
  Get,
  Inject,
  Injectable,
  Module,
  Param,
  Scope,
  type INestApplication,
} from '@nestjs/common';
import { ContextIdFactory, LazyModuleLoader, REQUEST } from '@nestjs/core';
import { Test } from '@nestjs/testing';
import type Redis from 'ioredis';
import request from 'supertest';
import {
  currentLock,
  Locked,
  LockService,
  RedisLockConfigError,
  RedisLockModule,
} from 'nestjs-redis-lock';
import { deleteKeys, redisClient, SHARED_REDIS_URL } from '../support/shared-redis';
import { Gate, waitFor } from '../support/time';
import { uniquePrefix } from '../support/unique-prefix';
import { createDecoratorApp } from './decorator-app';

const prefix = uniquePrefix('decorator-scopes');

/** The key of the lock a run holds (undefined: it ran unlocked), if it is the one for `id`. */
const heldKey = (id: string): string | undefined => {
  const key = currentLock()?.key;
  return key === undefined || key === `job:${id}` ? key : `another lock: ${key}`;
};

/** Events of the request-scoped runs, in the order they happened, and the gate each run awaits. */
const events: string[] = [];
const gates = new Map<string, Gate>();
const gateOf = (id: string): Gate => {
  if (!gates.has(id)) gates.set(id, new Gate());
  return gates.get(id)!;
};
let created = 0;

@Injectable({ scope: Scope.REQUEST })
class RequestJobs {
  private readonly instance = ++created;

  @Locked('job:<id>', { wait: 20_000 })
  async run(id: string): Promise<string> {
    events.push(`start ${id} #${this.instance} ${heldKey(id)}`);
    await gateOf(id).opened;
    events.push(`end ${id} #${this.instance}`);
    return 'done';
  }

  @Locked('job:<id>')
  async runOnce(id: string): Promise<string> {
    events.push(`start ${id} #${this.instance}`);
    await gateOf(id).opened;
    return 'done';
  }
}

@Controller('jobs')
class JobsController {
  constructor(private readonly jobs: RequestJobs) {}

  @Get('wait/:id')
  run(@Param('id') id: string): Promise<string> {
    return this.jobs.run(id);
  }

  @Get('once/:id')
  runOnce(@Param('id') id: string): Promise<string> {
    return this.jobs.runOnce(id).catch((error: Error) => error.name);
  }
}

@Injectable({ scope: Scope.REQUEST, durable: true })
class DurableJobs {
  @Locked('job:<id>')
  async run(id: string): Promise<string | undefined> {
    return heldKey(id);
  }
}

/** Request-scoped without saying so: it depends on the request. */
@Injectable()
class RequestAwareJobs {
  constructor(@Inject(REQUEST) readonly req: { tenant: string }) {}

  @Locked('job:<id>')
  async run(id: string): Promise<string | undefined> {
    return `${this.req.tenant} ${heldKey(id)}`;
  }
}

@Injectable({ scope: Scope.TRANSIENT })
class TransientJobs {
  @Locked('job:<id>')
  async run(id: string): Promise<string | undefined> {
    return heldKey(id);
  }
}

@Injectable()
class SingletonJobs {
  @Locked('job:<id>')
  async run(id: string): Promise<string | undefined> {
    return heldKey(id);
  }
}

@Injectable()
class LazyJobs extends SingletonJobs {}

@Module({ providers: [LazyJobs] })
class LazyJobsModule {}

/** Overrides the locked method without `@Locked`, and calls it through `super`. */
@Injectable()
class OverridingJobs extends SingletonJobs {
  override async run(id: string): Promise<string | undefined> {
    return super.run(id);
  }
}

const FACTORY_JOBS = 'FACTORY_JOBS';
const PER_REQUEST_FACTORY_JOBS = 'PER_REQUEST_FACTORY_JOBS';
const VALUE_JOBS = 'VALUE_JOBS';

describe('@Locked on every kind of provider', () => {
  let redis: Redis;

  beforeAll(() => {
    redis = redisClient();
  });

  afterAll(async () => {
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  describe('request-scoped: one instance per request, each locking', () => {
    let app: INestApplication;

    beforeAll(async () => {
      app = await createDecoratorApp({
        prefix,
        controllers: [JobsController],
        providers: [
          RequestJobs,
          DurableJobs,
          RequestAwareJobs,
          // Nest calls the factory per request and injects nothing into what it returns.
          {
            provide: PER_REQUEST_FACTORY_JOBS,
            useFactory: (req: { tenant: string }) => Object.assign(new LazyJobs(), { req }),
            inject: [REQUEST],
          },
        ],
        listen: true,
      });
    });

    afterAll(() => app?.close());

    it('two requests on one key exclude each other (a fail-fast call is refused)', async () => {
      events.length = 0;
      const first = request(app.getHttpServer())
        .get('/jobs/once/same')
        .then((r) => r);
      await waitFor(() => events.length === 1);
      const second = await request(app.getHttpServer()).get('/jobs/once/same');
      expect(second.text).toBe('LockNotAcquiredError');
      gateOf('same').release();
      expect((await first).text).toBe('done');
      expect(events).toHaveLength(1);
    });

    it('a waiting request on one key runs after the first one ends, not before', async () => {
      events.length = 0;
      const acquire = jest.spyOn(app.get(LockService), 'acquire');
      const first = request(app.getHttpServer())
        .get('/jobs/wait/w')
        .then((r) => r);
      await waitFor(() => events.length === 1);
      const second = request(app.getHttpServer())
        .get('/jobs/wait/w')
        .then((r) => r);
      // The second request's instance asks for the lock while the first holds it, and waits.
      await waitFor(() => acquire.mock.calls.length === 2);
      await app.get(LockService).isLocked('job:w'); // a round trip: its first try was answered
      acquire.mockRestore();
      expect(events).toHaveLength(1);
      gateOf('w').release();
      await waitFor(() => events.length === 3);
      gateOf('w').release();
      expect((await first).status).toBe(200);
      expect((await second).status).toBe(200);
      const instances = events.filter((e) => e.startsWith('start')).map((e) => e.split(' ')[2]);
      expect(new Set(instances).size).toBe(2); // two instances of the service
      expect(events.map((e) => e.split(' ').slice(0, 2).join(' '))).toEqual([
        'start w',
        'end w',
        'start w',
        'end w',
      ]);
      expect(events[0]).toMatch(/ job:w$/);
    });

    it('two requests on different keys run in parallel', async () => {
      events.length = 0;
      const first = request(app.getHttpServer())
        .get('/jobs/wait/p1')
        .then((r) => r);
      const second = request(app.getHttpServer())
        .get('/jobs/wait/p2')
        .then((r) => r);
      // Both started while neither gate is open: neither waits for the other.
      await waitFor(() => events.length === 2);
      expect(events.every((e) => e.startsWith('start'))).toBe(true);
      gateOf('p1').release();
      gateOf('p2').release();
      expect((await first).status).toBe(200);
      expect((await second).status).toBe(200);
    });

    it('an instance a factory builds per request (the factory depends on REQUEST)', async () => {
      const context = ContextIdFactory.create();
      app.registerRequestByContextId({ tenant: 't2' }, context);
      const jobs = await app.resolve<LazyJobs>(PER_REQUEST_FACTORY_JOBS, context);
      await expect(jobs.run('pf')).resolves.toBe('job:pf');
    });

    it('a durable provider and one that depends on REQUEST, resolved per context', async () => {
      const contextId = ContextIdFactory.create();
      const durable = await app.resolve(DurableJobs, contextId);
      await expect(durable.run('d')).resolves.toBe('job:d');
      const context = ContextIdFactory.create();
      app.registerRequestByContextId({ tenant: 't1' }, context);
      const aware = await app.resolve(RequestAwareJobs, context);
      await expect(aware.run('r')).resolves.toBe('t1 job:r');
    });
  });

  describe('other kinds, created at bootstrap or later', () => {
    let app: INestApplication;

    beforeAll(async () => {
      app = await createDecoratorApp({
        prefix,
        providers: [TransientJobs, OverridingJobs],
        imports: [
          {
            module: class FactoryModule {},
            providers: [
              { provide: FACTORY_JOBS, useFactory: () => new LazyJobs() },
              { provide: VALUE_JOBS, useValue: new LazyJobs() },
            ],
            exports: [FACTORY_JOBS, VALUE_JOBS],
          },
        ],
      });
    });

    afterAll(() => app?.close());

    it('a transient provider (app.resolve)', async () => {
      const jobs = await app.resolve(TransientJobs);
      await expect(jobs.run('t')).resolves.toBe('job:t');
    });

    it('a provider of a module loaded with LazyModuleLoader', async () => {
      const lazy = await app.get(LazyModuleLoader).load(() => LazyJobsModule);
      await expect(lazy.get(LazyJobs).run('l')).resolves.toBe('job:l');
    });

    it('a subclass that overrides the method without @Locked and calls super', async () => {
      await expect(app.get(OverridingJobs).run('s')).resolves.toBe('job:s');
    });

    it('an instance a factory returns (an inherited @Locked method)', async () => {
      await expect(app.get<LazyJobs>(FACTORY_JOBS).run('f')).resolves.toBe('job:f');
    });
  });

  it('a compile()-only testing module', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [RedisLockModule.forRoot({ redis: SHARED_REDIS_URL, prefix })],
      providers: [SingletonJobs],
    }).compile();
    try {
      await expect(moduleRef.get(SingletonJobs).run('c')).resolves.toBe('job:c');
    } finally {
      await moduleRef.close();
    }
  });

  it('a testing module that overrides LockService: @Locked uses the override', async () => {
    const override = new LockService({ redis: SHARED_REDIS_URL, prefix: `${prefix}override:` });
    const acquire = jest.spyOn(override, 'acquire');
    const moduleRef = await Test.createTestingModule({
      imports: [RedisLockModule.forRoot({ redis: SHARED_REDIS_URL, prefix })],
      providers: [SingletonJobs],
    })
      .overrideProvider(LockService)
      .useValue(override)
      .compile();
    try {
      await expect(moduleRef.get(SingletonJobs).run('o')).resolves.toBe('job:o');
      expect(acquire).toHaveBeenCalledWith('job:o', expect.anything());
    } finally {
      await moduleRef.close();
      await override.close();
    }
  });

  it('@Locked on a static method: RedisLockConfigError at class definition', () => {
    const define = (): unknown => {
      class StaticJobs {
        @Locked('job')
        static async run(): Promise<void> {}
      }
      return StaticJobs;
    };
    expect(define).toThrow(RedisLockConfigError);
    expect(define).toThrow(/StaticJobs\.run.*static/);
  });
});
