/**
 * Where and how often a `@Locked` route takes its lock, on Express and on Fastify: after its
 * guards and its pipes (neither sees the key held, a request they refuse takes no lock), once per
 * request even when the app registers `LockedInterceptor` itself (globally and on the controller),
 * under a decorator above `@Locked` that forwards a fixed number of arguments, and without adding
 * parameters to the route's metadata (which Swagger-style tools read).
 */
import {
  BadRequestException,
  type CallHandler,
  type CanActivate,
  Controller,
  type ExecutionContext,
  Get,
  Injectable,
  type INestApplication,
  type NestInterceptor,
  Param,
  type PipeTransform,
  UseGuards,
  UseInterceptors,
} from '@nestjs/common';
import { APP_INTERCEPTOR } from '@nestjs/core';
import { from, map, race, timer, type Observable } from 'rxjs';
import request from 'supertest';
import { currentLock, Locked, LockedInterceptor, LockService } from 'nestjs-redis-lock';
import { uniquePrefix } from '../support/unique-prefix';
import { Gate, sleep, waitFor } from '../support/time';
import { createDecoratorApp } from './decorator-app';

/** Nest's route-argument metadata key (`@nestjs/common` constants). */
const ROUTE_ARGS_METADATA = '__routeArguments__';

/** What each stage of a request saw of its key: held in Redis, and `currentLock()`. */
interface Seen {
  stage: string;
  heldInRedis: boolean;
  currentLock: string | undefined;
}
const seen: Seen[] = [];
let locks: LockService;

async function record(stage: string, key: string): Promise<void> {
  seen.push({
    stage,
    heldInRedis: await locks.isLocked(key),
    currentLock: currentLock()?.key,
  });
}

@Injectable()
class RecordingGuard implements CanActivate {
  async canActivate(context: ExecutionContext): Promise<boolean> {
    const id = context.switchToHttp().getRequest<{ params: { id: string } }>().params.id;
    await record('guard', `order:${id}`);
    return id !== 'refused-by-guard';
  }
}

@Injectable()
class RecordingPipe implements PipeTransform<string, Promise<string>> {
  async transform(id: string): Promise<string> {
    await record('pipe', `order:${id}`);
    if (id === 'refused-by-pipe') throw new BadRequestException('refused');
    return id;
  }
}

/** Forwards exactly two arguments, as hand-written wrappers often do, and keeps the metadata. */
function ForwardTwo(): MethodDecorator {
  return (_target, _key, descriptor) => {
    const original = descriptor.value as unknown as (a: unknown, b: unknown) => unknown;
    const wrapped = function (this: unknown, a: unknown, b: unknown): unknown {
      return original.call(this, a, b);
    };
    for (const key of Reflect.getOwnMetadataKeys(original)) {
      Reflect.defineMetadata(key, Reflect.getOwnMetadata(key, original), wrapped);
    }
    (descriptor as PropertyDescriptor).value = wrapped;
  };
}

let gate = new Gate();

/** Gives up on the handler after 200 ms and answers `{ gaveUp: true }` (a client-facing timeout). */
@Injectable()
class GiveUpInterceptor implements NestInterceptor {
  intercept(_context: ExecutionContext, next: CallHandler): Observable<unknown> {
    return race(next.handle(), timer(200).pipe(map(() => ({ gaveUp: true }))));
  }
}

/** The handlers that ran, by key. */
const ran: string[] = [];

@Controller('invocation')
@UseInterceptors(LockedInterceptor)
class InvocationController {
  @Get('ordered/:id')
  @UseGuards(RecordingGuard)
  @Locked('order:<id>')
  async ordered(@Param('id', RecordingPipe) id: string): Promise<{ id: string }> {
    await record('handler', `order:${id}`);
    return { id };
  }

  /** The CONTROL route: the same guard and pipe, a lock another holder took beforehand. */
  @Get('unlocked/:id')
  @UseGuards(RecordingGuard)
  async unlocked(@Param('id', RecordingPipe) id: string): Promise<{ id: string }> {
    return { id };
  }

  @Get('held/:id')
  @Locked('held:<id>')
  async held(@Param('id') id: string): Promise<{ id: string }> {
    await gate.opened;
    return { id };
  }

  @Get('waits/:id')
  @UseInterceptors(GiveUpInterceptor)
  @Locked('waits:<id>', { wait: 3_000 })
  async waitsThenGivenUp(@Param('id') id: string): Promise<{ id: string }> {
    ran.push(`waits:${id}`);
    return { id };
  }

  /** The CONTROL route: the same wait, nobody giving up. */
  @Get('waits-control/:id')
  @Locked('waits:<id>', { wait: 3_000 })
  async waits(@Param('id') id: string): Promise<{ id: string }> {
    ran.push(`waits:${id}`);
    return { id };
  }

  /**
   * Resolves to a stream its declared return type does not reveal: the lock is held until the
   * stream ends (Nest answers with its last value), not only until the promise settled.
   */
  @Get('stream-late/:id')
  @Locked('late:<id>')
  async streamLate(@Param('id') id: string): Promise<unknown> {
    return from(gate.opened.then(() => ({ id, key: currentLock()?.key ?? null })));
  }

  @Get('two/:a/:b')
  @ForwardTwo()
  @Locked('two:<b>')
  async two(@Param('a') a: string, @Param('b') _b: string): Promise<{ key?: string; a: string }> {
    await gate.opened;
    return { key: currentLock()?.key, a };
  }
}

describe.each([
  ['express', false],
  ['fastify', true],
])('@Locked route invocation on %s', (_platform, fastify) => {
  const prefix = uniquePrefix('route-invocation');
  let app: INestApplication;
  const acquired: string[] = [];
  const onAcquired = ({ key }: { key: string }): void => void acquired.push(key);

  beforeAll(async () => {
    app = await createDecoratorApp({
      prefix,
      fastify,
      controllers: [InvocationController],
      providers: [
        GiveUpInterceptor,
        RecordingGuard,
        RecordingPipe,
        { provide: APP_INTERCEPTOR, useClass: LockedInterceptor },
      ],
    });
    locks = app.get(LockService);
    locks.on('acquired', onAcquired);
  });

  afterAll(async () => {
    locks?.off('acquired', onAcquired);
    await app?.close();
  });

  beforeEach(() => {
    seen.length = 0;
    acquired.length = 0;
    ran.length = 0;
    gate = new Gate();
  });

  it('CONTROL: a guard and a pipe see a key another holder took', async () => {
    const other = await locks.acquire('order:u-0');
    try {
      const response = await request(app.getHttpServer()).get('/invocation/unlocked/u-0');
      expect(response.status).toBe(200);
      expect(seen.map((one) => [one.stage, one.heldInRedis])).toEqual([
        ['guard', true],
        ['pipe', true],
      ]);
    } finally {
      await other.release();
    }
  });

  it('takes the lock after the guards and the pipes, and holds it while the handler runs', async () => {
    const response = await request(app.getHttpServer()).get('/invocation/ordered/u-1');
    expect(response.status).toBe(200);
    expect(seen).toEqual([
      { stage: 'guard', heldInRedis: false, currentLock: undefined },
      { stage: 'pipe', heldInRedis: false, currentLock: undefined },
      { stage: 'handler', heldInRedis: true, currentLock: 'order:u-1' },
    ]);
    expect(acquired).toEqual(['order:u-1']);
  });

  it('takes no lock for a request its guard or its pipe refuses', async () => {
    const byGuard = await request(app.getHttpServer()).get('/invocation/ordered/refused-by-guard');
    const byPipe = await request(app.getHttpServer()).get('/invocation/ordered/refused-by-pipe');
    expect([byGuard.status, byPipe.status]).toEqual([403, 400]);
    expect(acquired).toEqual([]);
    expect(seen.map((one) => one.stage)).toEqual(['guard', 'guard', 'pipe']);
  });

  it('locks once per request with LockedInterceptor also registered globally and on the controller', async () => {
    const server = app.getHttpServer();
    const first = request(server)
      .get('/invocation/held/h-1')
      .then((r) => r);
    await waitFor(() => acquired.length === 1);
    const second = await request(server).get('/invocation/held/h-1');
    expect(second.status).toBe(409);
    gate.release();
    expect((await first).status).toBe(200);
    // One grant for the first request, none for the busy one: no nested lock on its own key.
    expect(acquired).toEqual(['held:h-1']);
    await waitFor(async () => !(await locks.isLocked('held:h-1')));
  });

  it('locks a route under a decorator that forwards a fixed number of arguments', async () => {
    const server = app.getHttpServer();
    const first = request(server)
      .get('/invocation/two/a-1/b-1')
      .then((r) => r);
    await waitFor(() => acquired.length === 1);
    expect((await request(server).get('/invocation/two/a-2/b-1')).status).toBe(409);
    gate.release();
    const answer = await first;
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ key: 'two:b-1', a: 'a-1' });
    expect(acquired).toEqual(['two:b-1']);
  });

  it('CONTROL: a request waiting for a busy key runs once the holder releases it', async () => {
    const other = await locks.acquire('waits:w-0');
    const answer = request(app.getHttpServer())
      .get('/invocation/waits-control/w-0')
      .then((r) => r);
    await sleep(300);
    await other.release();
    expect((await answer).status).toBe(200);
    expect(ran).toEqual(['waits:w-0']);
  });

  it('stops waiting for the lock when the caller gave up, and never runs the handler', async () => {
    const other = await locks.acquire('waits:w-1');
    const answer = await request(app.getHttpServer()).get('/invocation/waits/w-1');
    expect(answer.body).toEqual({ gaveUp: true });
    await other.release();
    await sleep(300); // a waiter still waiting would have been woken and granted by now
    expect(ran).toEqual([]);
    expect(acquired.filter((key) => key === 'waits:w-1')).toEqual(['waits:w-1']); // `other` only
    expect(await locks.isLocked('waits:w-1')).toBe(false);
  });

  it('holds the lock of a route whose promise resolves to a stream until the stream ends', async () => {
    const server = app.getHttpServer();
    const first = request(server)
      .get('/invocation/stream-late/s-1')
      .then((r) => r);
    await waitFor(() => acquired.length === 1);
    // The handler's promise has settled; its stream has not ended: the key is still held.
    await sleep(100);
    expect(await locks.isLocked('late:s-1')).toBe(true);
    expect((await request(server).get('/invocation/stream-late/s-1')).status).toBe(409);
    gate.release();
    const answer = await first;
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ id: 's-1' });
    await waitFor(async () => !(await locks.isLocked('late:s-1')));
  });

  it("adds no parameter to a route's metadata", () => {
    const keysOf = (name: string): string[] =>
      Object.keys(Reflect.getMetadata(ROUTE_ARGS_METADATA, InvocationController, name) ?? {});
    expect(keysOf('ordered')).toEqual(['5:0']);
    expect(keysOf('held')).toEqual(['5:0']);
    expect(keysOf('two').sort()).toEqual(['5:0', '5:1']);
  });
});
