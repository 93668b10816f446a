import 'reflect-metadata';
import { Agent, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Controller, Get, Module, Param, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Locked, LockService, RedisLockModule } from 'nestjs-redis-lock';
import { mean, percentile, nowUs } from './stats';

/**
 * A client handed to the library must come from the ioredis copy the library itself resolves
 * (the repo root's), not from bench/node_modules.
 */
// eslint-disable-next-line @typescript-eslint/no-require-imports
const RootRedis = require(
  require.resolve('ioredis', { paths: [join(__dirname, '../../lib')] }),
) as typeof import('ioredis').default;

type Route = 'plain' | 'pings' | 'manual' | 'locked';
const ROUTES: Route[] = ['plain', 'pings', 'manual', 'locked'];

export interface S5Metrics extends Record<string, number> {
  /** PING round trip on the lock's own connection in a tight loop, µs (median). */
  rttUs: number;
  /** LockService acquire + release on the same connection in a tight loop, µs (median). */
  lockOpUs: number;
  /** Sequential request latency p50 per route, µs. */
  seqPlainP50Us: number;
  seqPingsP50Us: number;
  seqManualP50Us: number;
  seqLockedP50Us: number;
  seqAddedP50Us: number;
  seqAddedMeanUs: number;
  /** Added latency of @Locked in PING RTTs (tight loop), as the bar counts. */
  seqAddedRtt: number;
  /** Added latency of @Locked in round trips made inside a handler (half of the `pings` route's). */
  seqAddedHandlerRtt: number;
  /** CPU time of this process (HTTP client + Nest + lock) per sequential request, µs. */
  seqPlainCpuUs: number;
  seqPingsCpuUs: number;
  seqManualCpuUs: number;
  seqLockedCpuUs: number;
  concPlainMeanUs: number;
  concLockedMeanUs: number;
  concAddedMeanUs: number;
  concAddedRtt: number;
  concPlainRps: number;
  concLockedRps: number;
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
 * S5: one Nest app (express), four routes returning the same body: `plain` (undecorated),
 * `pings` (two PINGs on the lock's connection: what two round trips cost inside a handler),
 * `manual` (LockService acquire + release inside the handler) and `locked`
 * (`@Locked('bench:<id>')`). Every request uses a fresh id (uncontended). Sequential requests
 * in interleaved blocks, then 16 concurrent keep-alive loops on `plain` and `locked`.
 */
export async function s5Once(
  url: string,
  sequential: number,
  concurrentTotal: number,
): Promise<S5Metrics> {
  const client = new RootRedis(url);
  client.on('error', () => undefined);

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

    @Get('manual/:id')
    async manual(@Param('id') id: string) {
      const lock = await this.locks.acquire(`bench:${id}`);
      try {
        return { id };
      } finally {
        await lock.release();
      }
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

    const seq: Record<Route, number[]> = { plain: [], pings: [], manual: [], locked: [] };
    const cpu: Record<Route, number> = { plain: 0, pings: 0, manual: 0, locked: 0 };
    const block = 100;
    for (let done = 0; done < sequential; done += block) {
      for (const route of ROUTES) {
        const cpu0 = process.cpuUsage();
        for (let i = 0; i < block; i++) seq[route].push(await hit(route));
        const used = process.cpuUsage(cpu0);
        cpu[route] += used.user + used.system;
      }
    }

    const conc = { plain: [] as number[], locked: [] as number[] };
    const elapsed = { plain: 0, locked: 0 };
    const loops = 16;
    const phases = 4;
    for (let phase = 0; phase < phases; phase++) {
      for (const route of ['plain', 'locked'] as const) {
        const perLoop = Math.ceil(concurrentTotal / phases / loops);
        const t0 = nowUs();
        await Promise.all(
          Array.from({ length: loops }, async () => {
            for (let i = 0; i < perLoop; i++) conc[route].push(await hit(route));
          }),
        );
        elapsed[route] += nowUs() - t0;
      }
    }

    const rttUs = percentile(pings, 50);
    const p50 = (route: Route): number => percentile(seq[route], 50);
    const seqAddedP50Us = p50('locked') - p50('plain');
    const handlerRtt = (p50('pings') - p50('plain')) / 2;
    const concAddedMeanUs = mean(conc.locked) - mean(conc.plain);
    return {
      rttUs,
      lockOpUs: percentile(lockOps, 50),
      seqPlainP50Us: p50('plain'),
      seqPingsP50Us: p50('pings'),
      seqManualP50Us: p50('manual'),
      seqLockedP50Us: p50('locked'),
      seqAddedP50Us,
      seqAddedMeanUs: mean(seq.locked) - mean(seq.plain),
      seqAddedRtt: seqAddedP50Us / rttUs,
      seqAddedHandlerRtt: seqAddedP50Us / handlerRtt,
      seqPlainCpuUs: cpu.plain / seq.plain.length,
      seqPingsCpuUs: cpu.pings / seq.pings.length,
      seqManualCpuUs: cpu.manual / seq.manual.length,
      seqLockedCpuUs: cpu.locked / seq.locked.length,
      concPlainMeanUs: mean(conc.plain),
      concLockedMeanUs: mean(conc.locked),
      concAddedMeanUs,
      concAddedRtt: concAddedMeanUs / rttUs,
      concPlainRps: conc.plain.length / (elapsed.plain / 1e6),
      concLockedRps: conc.locked.length / (elapsed.locked / 1e6),
      non200,
    };
  } finally {
    agent.destroy();
    await app.close();
    await client.quit();
  }
}
