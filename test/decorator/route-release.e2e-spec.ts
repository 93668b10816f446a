/**
 * A `@Locked` route and the `@Locked` job it starts hold one key with two counted holds, each
 * with its own handle: the route's `release()` (or its end) ends only the route's hold, the job's
 * signal stays live until the key is really released or lost, and a lock released on purpose is
 * not reported as lost. On Express and on Fastify.
 */
import { Controller, Injectable, Param, Post, type INestApplication } from '@nestjs/common';
import request from 'supertest';
import { currentLock, Locked, LockService } from 'nestjs-redis-lock';
import { onSharedRedis } from '../support/lock-services';
import { Gate, waitFor } from '../support/time';
import { createDecoratorApp } from './decorator-app';

const jobGate = new Gate();
const routeGate = new Gate();

interface JobView {
  aborted: boolean;
  isHeld: boolean;
  otherGotKey?: boolean;
}

@Injectable()
class Jobs {
  running?: Promise<JobView>;
  other?: LockService;

  @Locked('job:<id>')
  async run(id: string): Promise<JobView> {
    const lock = currentLock()!;
    await jobGate.opened;
    const stolen = await this.other!.tryAcquire(`job:${id}`);
    await stolen?.release();
    return { aborted: lock.signal.aborted, isHeld: lock.isHeld, otherGotKey: stolen !== null };
  }
}

@Controller('jobs')
class JobsController {
  constructor(private readonly jobs: Jobs) {}

  /** Starts the job and returns at once: the job outlives the route. */
  @Post('launch/:id')
  @Locked('job:<id>')
  async launch(@Param('id') id: string): Promise<{ started: true }> {
    this.jobs.running = this.jobs.run(id);
    return { started: true };
  }

  /** Starts the job, then says "my part is done" while it still runs. */
  @Post('release/:id')
  @Locked('job:<id>')
  async releaseEarly(@Param('id') id: string): Promise<{ released: boolean }> {
    this.jobs.running = this.jobs.run(id);
    const released = await currentLock()!.release();
    jobGate.release(); // the job goes on while the route still runs
    await routeGate.opened;
    return { released };
  }

  /** Releases its lock once its critical part is done, then answers. */
  @Post('alone/:id')
  @Locked('job:<id>')
  async alone(@Param('id') id: string): Promise<{ id: string; released: boolean }> {
    const released = await currentLock()!.release();
    return { id, released };
  }
}

describe.each([
  ['express', false],
  ['fastify', true],
] as const)('on %s', (platform, fastify) => {
  const { prefix, services, redis, keyOf } = onSharedRedis(`route-release-${platform}`);
  let app: INestApplication;
  let jobs: Jobs;
  let other: LockService;

  beforeAll(async () => {
    app = await createDecoratorApp({
      prefix,
      controllers: [JobsController],
      providers: [Jobs],
      fastify,
    });
    jobs = app.get(Jobs);
    other = services.create();
    jobs.other = other;
  });
  afterAll(() => app?.close());

  describe('a @Locked route and the @Locked job it started', () => {
    it("the job keeps a live handle of its own after the route's hold ended", async () => {
      const response = await request(app.getHttpServer()).post('/jobs/launch/a');
      expect(response.status).toBe(201);
      // The route answered and its hold ended; the job's hold keeps the key.
      expect(await redis.exists(keyOf('job:a'))).toBe(1);
      jobGate.release();
      expect(await jobs.running).toEqual({ aborted: false, isHeld: true, otherGotKey: false });
      await waitFor(async () => (await redis.exists(keyOf('job:a'))) === 0, 2_000);
    });

    it("the route's release() ends only the route's hold: the job keeps the key and a live signal", async () => {
      jobs.running = undefined;
      const answer = request(app.getHttpServer()).post('/jobs/release/b');
      const status = answer.then((r) => r.status);
      await waitFor(() => jobs.running !== undefined, 2_000);
      const seen = await jobs.running!;
      routeGate.release();
      expect(await status).toBe(201);
      expect(seen).toEqual({ aborted: false, isHeld: true, otherGotKey: false });
      await waitFor(async () => (await redis.exists(keyOf('job:b'))) === 0, 2_000);
    });
  });

  it('a route that released its lock early answers with its result, not a lock loss', async () => {
    const lost: string[] = [];
    app.get(LockService).on('lost', (error) => lost.push(error.reason));
    const response = await request(app.getHttpServer()).post('/jobs/alone/c');
    expect(response.status).toBe(201);
    expect(response.body).toEqual({ id: 'c', released: true });
    expect(lost).toEqual([]);
    expect(await redis.exists(keyOf('job:c'))).toBe(0);
  });
});
