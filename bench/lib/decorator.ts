import 'reflect-metadata';
import { randomUUID } from 'node:crypto';
import { Agent, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import {
  ConflictException,
  Controller,
  Get,
  Injectable,
  Module,
  Param,
  UseInterceptors,
  type CallHandler,
  type INestApplication,
  type NestInterceptor,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Locked, LockService, RedisLockModule } from 'nestjs-redis-lock';
import { mean, median, percentile, nowUs } from './stats';

/**
 * A client handed to the library must come from the ioredis copy the library itself resolves
 * (the repo root's), not from bench/node_modules.
 */
// eslint-disable-next-line @typescript-eslint/no-require-imports
const RootRedis = require(
  require.resolve('ioredis', { paths: [join(__dirname, '../../lib')] }),
) as typeof import('ioredis').default;

type Route = 'plain' | 'pings' | 'floor' | 'manual' | 'withlock' | 'intercepted' | 'locked';
const ROUTES: Route[] = ['plain', 'pings', 'floor', 'manual', 'withlock', 'intercepted', 'locked'];
/** The routes of the concurrent part. */
const CONCURRENT = ['plain', 'floor', 'withlock', 'intercepted', 'locked'] as const;
type ConcurrentRoute = (typeof CONCURRENT)[number];
/**
 * Interleaved phases of the concurrent part: many short ones, so that the median of the
 * neighbouring routes' ratios holds on a machine other work loads in bursts.
 */
const CONCURRENT_PHASES = 10;

/**
 * An interceptor that does nothing: what Nest's interceptor chain costs by itself (RxJS `defer` and
 * `mergeAll`, two `AsyncResource.bind` per call), which any decorator that needs the request pays.
 */
@Injectable()
class PassThroughInterceptor implements NestInterceptor {
  intercept(_context: unknown, next: CallHandler) {
    return next.handle();
  }
}

/** The floor route's release: compare-and-delete, as the raw reference of S1/S2 sends it. */
const DEL_IF_EQUAL = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`;
/** The library's default lease, which the floor route's SET asks for too. */
const FLOOR_TTL_MS = 30_000;

export interface S5Metrics extends Record<string, number> {
  /** PING round trip on the lock's own connection in a tight loop, µs (median). */
  rttUs: number;
  /** LockService acquire + release on the same connection in a tight loop, µs (median). */
  lockOpUs: number;
  /** Sequential request latency p50 per route, µs. */
  seqPlainP50Us: number;
  seqPingsP50Us: number;
  /** The floor route: `SET key token NX PX ttl`, then EVALSHA compare-and-delete, by hand. */
  seqFloorP50Us: number;
  seqManualP50Us: number;
  /** The same route calling `LockService.withLock` by hand, same key and work: @Locked's bar. */
  seqWithLockP50Us: number;
  /**
   * The withLock route behind a pass-through interceptor: the same lock and Nest's interceptor
   * chain, with nothing of ours in it — the floor of a `@Locked` route that keeps
   * `LockedInterceptor` (one whose key is read from the request, or with interceptors of its own).
   * This one is locked without it.
   */
  seqInterceptedP50Us: number;
  seqLockedP50Us: number;
  seqAddedP50Us: number;
  seqAddedMeanUs: number;
  /** Added latency of @Locked in PING RTTs (tight loop), as the bar counts. */
  seqAddedRtt: number;
  /** Added latency of @Locked in round trips made inside a handler (half of the `pings` route's). */
  seqAddedHandlerRtt: number;
  /** Half the latency two PINGs add to a request (`pings` − `plain`, p50s), µs: a handler RTT. */
  handlerRttUs: number;
  /** What @Locked adds over the floor route (same two commands by hand), p50, µs. */
  seqOverFloorP50Us: number;
  /** The same in handler RTTs: the bar's measure. */
  seqOverFloorHandlerRtt: number;
  /** CPU time of this process (HTTP client + Nest + lock) per sequential request, µs. */
  seqPlainCpuUs: number;
  seqPingsCpuUs: number;
  seqFloorCpuUs: number;
  seqManualCpuUs: number;
  seqWithLockCpuUs: number;
  seqInterceptedCpuUs: number;
  seqLockedCpuUs: number;
  /** @Locked CPU per sequential request over the withLock route's (each repetition's ratio). */
  seqLockedVsWithLockCpu: number;
  /** @Locked CPU per sequential request over the intercepted withLock route's. */
  seqLockedVsInterceptedCpu: number;
  concPlainMeanUs: number;
  concFloorMeanUs: number;
  concWithLockMeanUs: number;
  concInterceptedMeanUs: number;
  concLockedMeanUs: number;
  concAddedMeanUs: number;
  concAddedRtt: number;
  concPlainRps: number;
  concFloorRps: number;
  concWithLockRps: number;
  concInterceptedRps: number;
  concLockedRps: number;
  /** @Locked requests/s over the withLock route's, at 16 concurrent (each phase's ratio, median). */
  concLockedVsWithLock: number;
  /** @Locked requests/s over the intercepted withLock route's, at 16 concurrent (phase median). */
  concLockedVsIntercepted: number;
  /** @Locked requests/s over the floor route's, at 16 concurrent (each phase's ratio, median). */
  concLockedVsFloor: number;
  /** CPU time of this process per request at 16 concurrent, µs (what bounds requests/s there). */
  concPlainCpuUs: number;
  concFloorCpuUs: number;
  concWithLockCpuUs: number;
  concInterceptedCpuUs: number;
  concLockedCpuUs: number;
  /** @Locked CPU per request over the withLock route's, at 16 concurrent (phase ratios, median). */
  concLockedVsWithLockCpu: number;
  /** @Locked CPU per request over the intercepted withLock route's, at 16 concurrent. */
  concLockedVsInterceptedCpu: number;
  /** @Locked CPU per request over the floor route's, at 16 concurrent (each phase's ratio, median). */
  concLockedVsFloorCpu: number;
  non200: number;
}

function get(agent: Agent, port: number, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, agent }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}

/**
 * S5: one Nest app (express), seven routes returning the same body: `plain` (undecorated),
 * `pings` (two PINGs on the lock's connection: what two round trips cost inside a handler),
 * `floor` (undecorated, sends by hand on the lock's connection the two commands a lock needs at
 * least: `SET key token NX PX ttl`, then the compare-and-delete script by EVALSHA), `manual`
 * (LockService acquire + release inside the handler), `withlock` (`LockService.withLock` on the
 * same key, the same work inside: what @Locked is judged against), `intercepted` (the withlock
 * route behind a pass-through interceptor: the floor of a @Locked route that keeps
 * LockedInterceptor, Nest's interceptor chain with nothing of ours in it) and `locked`
 * (`@Locked('bench:<id>')`, which needs no interceptor). Every request uses a fresh id
 * (uncontended). Sequential requests in interleaved blocks, each round starting with another
 * route, then 16 concurrent keep-alive loops on `plain`, `floor`, `withlock`, `intercepted` and
 * `locked`, in 10 interleaved phases.
 */
export async function s5Once(
  url: string,
  sequential: number,
  concurrentTotal: number,
): Promise<S5Metrics> {
  const client = new RootRedis(url);
  client.on('error', () => undefined);
  client.defineCommand('s5DelIfEqual', { numberOfKeys: 1, lua: DEL_IF_EQUAL });
  const scripted = client as unknown as {
    s5DelIfEqual(key: string, token: string): Promise<unknown>;
  };
  const delIfEqual = (key: string, token: string): Promise<unknown> =>
    scripted.s5DelIfEqual(key, token);

  @Controller()
  class BenchController {
    constructor(private readonly locks: LockService) {}

    @Get('plain/:id')
    plain(@Param('id') id: string) {
      return { id };
    }

    @Get('pings/:id')
    async pings(@Param('id') id: string) {
      await client.ping();
      await client.ping();
      return { id };
    }

    @Get('floor/:id')
    async floor(@Param('id') id: string) {
      const key = `bench:s5:floor:${id}`;
      const token = randomUUID();
      if ((await client.set(key, token, 'PX', FLOOR_TTL_MS, 'NX')) !== 'OK') {
        throw new ConflictException();
      }
      try {
        return { id };
      } finally {
        await delIfEqual(key, token);
      }
    }

    @Get('manual/:id')
    async manual(@Param('id') id: string) {
      const lock = await this.locks.acquire(`bench:${id}`);
      try {
        return { id };
      } finally {
        await lock.release();
      }
    }

    @Get('withlock/:id')
    withLock(@Param('id') id: string) {
      // The key @Locked('bench:<id>') builds, and the same body built inside the lock.
      return this.locks.withLock(`bench:${id}`, () => ({ id }));
    }

    @Get('intercepted/:id')
    @UseInterceptors(PassThroughInterceptor)
    intercepted(@Param('id') id: string) {
      return this.locks.withLock(`bench:${id}`, () => ({ id }));
    }

    @Get('locked/:id')
    @Locked('bench:<id>')
    async locked(@Param('id') id: string) {
      return { id };
    }
  }

  @Module({
    imports: [RedisLockModule.forRoot({ redis: client, prefix: 'bench:s5:' })],
    controllers: [BenchController],
  })
  class BenchAppModule {}

  const app: INestApplication = await NestFactory.create(BenchAppModule, { logger: false });
  await app.listen(0, '127.0.0.1');
  const port = (app.getHttpServer().address() as AddressInfo).port;
  const agent = new Agent({ keepAlive: true, maxSockets: 16 });
  const run = Math.random().toString(36).slice(2, 8);
  let id = 0;
  let non200 = 0;
  const hit = async (route: Route): Promise<number> => {
    const t0 = nowUs();
    const status = await get(agent, port, `/${route}/${run}-${id++}`);
    if (status !== 200) non200++;
    return nowUs() - t0;
  };
  try {
    // Warm up Nest, express, the lock's scripts and the JIT.
    for (let i = 0; i < 300; i++) for (const route of ROUTES) await hit(route);
    const pings: number[] = [];
    for (let i = 0; i < 2_000; i++) {
      const t0 = nowUs();
      await client.ping();
      pings.push(nowUs() - t0);
    }
    const locks = app.get(LockService);
    const lockOps: number[] = [];
    for (let i = 0; i < 2_000; i++) {
      const t0 = nowUs();
      await (await locks.acquire(`s5-direct:${run}:${i}`)).release();
      lockOps.push(nowUs() - t0);
    }

    const seq: Record<Route, number[]> = {
      plain: [],
      pings: [],
      floor: [],
      manual: [],
      withlock: [],
      intercepted: [],
      locked: [],
    };
    const cpu: Record<Route, number> = {
      plain: 0,
      pings: 0,
      floor: 0,
      manual: 0,
      withlock: 0,
      intercepted: 0,
      locked: 0,
    };
    const block = 100;
    for (let done = 0, round = 0; done < sequential; done += block, round++) {
      // Each round starts with another route, so none always follows the same one: a block also
      // pays for the garbage the block before it left (the intercepted route's RxJS pipeline).
      const shift = round % ROUTES.length;
      for (const route of [...ROUTES.slice(shift), ...ROUTES.slice(0, shift)]) {
        const cpu0 = process.cpuUsage();
        for (let i = 0; i < block; i++) seq[route].push(await hit(route));
        const used = process.cpuUsage(cpu0);
        cpu[route] += used.user + used.system;
      }
    }

    const zeros = (): Record<ConcurrentRoute, number> => ({
      plain: 0,
      floor: 0,
      withlock: 0,
      intercepted: 0,
      locked: 0,
    });
    const conc: Record<ConcurrentRoute, number[]> = {
      plain: [],
      floor: [],
      withlock: [],
      intercepted: [],
      locked: [],
    };
    const elapsed = zeros();
    const concCpu = zeros();
    const lockedVsFloor: number[] = [];
    const lockedVsFloorCpu: number[] = [];
    const lockedVsWithLock: number[] = [];
    const lockedVsWithLockCpu: number[] = [];
    const lockedVsIntercepted: number[] = [];
    const lockedVsInterceptedCpu: number[] = [];
    const loops = 16;
    for (let phase = 0; phase < CONCURRENT_PHASES; phase++) {
      const rps = zeros();
      const perRequestCpu = zeros();
      // Each phase starts with another route, so none always follows the same one.
      const shift = phase % CONCURRENT.length;
      const order: ConcurrentRoute[] = [...CONCURRENT.slice(shift), ...CONCURRENT.slice(0, shift)];
      for (const route of order) {
        const perLoop = Math.ceil(concurrentTotal / CONCURRENT_PHASES / loops);
        const cpu0 = process.cpuUsage();
        const t0 = nowUs();
        await Promise.all(
          Array.from({ length: loops }, async () => {
            for (let i = 0; i < perLoop; i++) conc[route].push(await hit(route));
          }),
        );
        const took = nowUs() - t0;
        const used = process.cpuUsage(cpu0);
        elapsed[route] += took;
        concCpu[route] += used.user + used.system;
        rps[route] = (perLoop * loops) / (took / 1e6);
        perRequestCpu[route] = (used.user + used.system) / (perLoop * loops);
      }
      // Neighbouring phases see the same machine: their ratio is what load does not skew.
      lockedVsFloor.push(rps.locked / rps.floor);
      lockedVsFloorCpu.push(perRequestCpu.locked / perRequestCpu.floor);
      lockedVsWithLock.push(rps.locked / rps.withlock);
      lockedVsWithLockCpu.push(perRequestCpu.locked / perRequestCpu.withlock);
      lockedVsIntercepted.push(rps.locked / rps.intercepted);
      lockedVsInterceptedCpu.push(perRequestCpu.locked / perRequestCpu.intercepted);
    }

    const rttUs = percentile(pings, 50);
    const p50 = (route: Route): number => percentile(seq[route], 50);
    const seqAddedP50Us = p50('locked') - p50('plain');
    const handlerRtt = (p50('pings') - p50('plain')) / 2;
    const seqOverFloorP50Us = p50('locked') - p50('floor');
    const concAddedMeanUs = mean(conc.locked) - mean(conc.plain);
    return {
      rttUs,
      lockOpUs: percentile(lockOps, 50),
      seqPlainP50Us: p50('plain'),
      seqPingsP50Us: p50('pings'),
      seqFloorP50Us: p50('floor'),
      seqManualP50Us: p50('manual'),
      seqWithLockP50Us: p50('withlock'),
      seqInterceptedP50Us: p50('intercepted'),
      seqLockedP50Us: p50('locked'),
      seqAddedP50Us,
      seqAddedMeanUs: mean(seq.locked) - mean(seq.plain),
      seqAddedRtt: seqAddedP50Us / rttUs,
      seqAddedHandlerRtt: seqAddedP50Us / handlerRtt,
      handlerRttUs: handlerRtt,
      seqOverFloorP50Us,
      seqOverFloorHandlerRtt: seqOverFloorP50Us / handlerRtt,
      seqPlainCpuUs: cpu.plain / seq.plain.length,
      seqPingsCpuUs: cpu.pings / seq.pings.length,
      seqFloorCpuUs: cpu.floor / seq.floor.length,
      seqManualCpuUs: cpu.manual / seq.manual.length,
      seqWithLockCpuUs: cpu.withlock / seq.withlock.length,
      seqInterceptedCpuUs: cpu.intercepted / seq.intercepted.length,
      seqLockedCpuUs: cpu.locked / seq.locked.length,
      seqLockedVsWithLockCpu: cpu.locked / seq.locked.length / (cpu.withlock / seq.withlock.length),
      seqLockedVsInterceptedCpu:
        cpu.locked / seq.locked.length / (cpu.intercepted / seq.intercepted.length),
      concPlainMeanUs: mean(conc.plain),
      concFloorMeanUs: mean(conc.floor),
      concWithLockMeanUs: mean(conc.withlock),
      concInterceptedMeanUs: mean(conc.intercepted),
      concLockedMeanUs: mean(conc.locked),
      concAddedMeanUs,
      concAddedRtt: concAddedMeanUs / rttUs,
      concPlainRps: conc.plain.length / (elapsed.plain / 1e6),
      concFloorRps: conc.floor.length / (elapsed.floor / 1e6),
      concWithLockRps: conc.withlock.length / (elapsed.withlock / 1e6),
      concInterceptedRps: conc.intercepted.length / (elapsed.intercepted / 1e6),
      concLockedRps: conc.locked.length / (elapsed.locked / 1e6),
      concLockedVsFloor: median(lockedVsFloor),
      concLockedVsWithLock: median(lockedVsWithLock),
      concLockedVsIntercepted: median(lockedVsIntercepted),
      concPlainCpuUs: concCpu.plain / conc.plain.length,
      concFloorCpuUs: concCpu.floor / conc.floor.length,
      concWithLockCpuUs: concCpu.withlock / conc.withlock.length,
      concInterceptedCpuUs: concCpu.intercepted / conc.intercepted.length,
      concLockedCpuUs: concCpu.locked / conc.locked.length,
      concLockedVsFloorCpu: median(lockedVsFloorCpu),
      concLockedVsWithLockCpu: median(lockedVsWithLockCpu),
      concLockedVsInterceptedCpu: median(lockedVsInterceptedCpu),
      non200,
    };
  } finally {
    agent.destroy();
    await app.close();
    await client.quit();
  }
}
