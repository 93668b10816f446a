import { readFileSync } from 'node:fs';
import { Logger } from '@nestjs/common';
import Redis from 'ioredis';
import { LockService, type LockHandle } from 'nestjs-redis-lock';
import { commandStats } from './commands';
import { median, nowUs, sleep } from './stats';

/** Full garbage collection, twice (a second pass frees what the first one's finalizers let go). */
export const gc = (): void => {
  const collect = (globalThis as { gc?: () => void }).gc;
  if (!collect) throw new Error('S6 needs node --expose-gc');
  collect();
  collect();
};

const heapMb = (): number => process.memoryUsage().heapUsed / 2 ** 20;

export interface S6CyclesResult {
  cycles: number;
  concurrency: number;
  seconds: number;
  opsPerSec: number;
  heapBeforeMb: number;
  heapAfterMb: number;
  /** Heap after GC at each tenth of the run (MB). */
  heapCheckpointsMb: number[];
  /** Least-squares slope of the checkpoints, KB per 100k cycles. */
  slopeKbPer100k: number;
  rssBeforeMb: number;
  rssAfterMb: number;
}

/**
 * S6a: `cycles` acquire/release cycles through one LockService, in 64 concurrent loops over 6,400
 * distinct keys; heap after GC before, at every tenth, and after.
 */
export async function s6Cycles(
  url: string,
  cycles: number,
  concurrency = 64,
): Promise<S6CyclesResult> {
  const locks = new LockService({ redis: url, prefix: 'bench:s6:' });
  try {
    const runLoops = async (count: number, tag: string): Promise<void> => {
      let next = 0;
      await Promise.all(
        Array.from({ length: concurrency }, async (_, loop) => {
          for (let i = next++; i < count; i = next++) {
            await (await locks.acquire(`${tag}:${loop}:${i % 100}`)).release();
          }
        }),
      );
    };
    await runLoops(20_000, 'warm');
    gc();
    const heapBeforeMb = heapMb();
    const rssBeforeMb = process.memoryUsage().rss / 2 ** 20;
    const checkpoints: number[] = [heapBeforeMb];
    const tenth = Math.ceil(cycles / 10);
    const started = nowUs();
    let busyUs = 0;
    for (let done = 0; done < cycles; done += tenth) {
      const t0 = nowUs();
      await runLoops(Math.min(tenth, cycles - done), 'c');
      busyUs += nowUs() - t0;
      gc();
      checkpoints.push(heapMb());
    }
    const heapAfterMb = checkpoints[checkpoints.length - 1];
    const xs = checkpoints.map((_, i) => i * tenth);
    const mx = xs.reduce((a, b) => a + b, 0) / xs.length;
    const my = checkpoints.reduce((a, b) => a + b, 0) / checkpoints.length;
    let num = 0;
    let den = 0;
    for (let i = 0; i < xs.length; i++) {
      num += (xs[i] - mx) * (checkpoints[i] - my);
      den += (xs[i] - mx) ** 2;
    }
    return {
      cycles,
      concurrency,
      seconds: (nowUs() - started) / 1e6,
      opsPerSec: cycles / (busyUs / 1e6),
      heapBeforeMb,
      heapAfterMb,
      heapCheckpointsMb: checkpoints,
      slopeKbPer100k: den === 0 ? 0 : (num / den) * 1024 * 100_000,
      rssBeforeMb,
      rssAfterMb: process.memoryUsage().rss / 2 ** 20,
    };
  } finally {
    await locks.close();
  }
}

/**
 * Counts live timers, unref'ed ones included (process.getActiveResourcesInfo() lists only ref'ed
 * ones), by wrapping the global setTimeout/clearTimeout while a measurement runs. Cheaper than
 * async_hooks, whose promise hooks would slow every await in the process.
 */
function trackTimers() {
  const originalSet = globalThis.setTimeout;
  const originalClear = globalThis.clearTimeout;
  const live = new Set<unknown>();
  const state = {
    created: 0,
    /** Most timers alive at once (checked at every creation). */
    peak: 0,
    get live(): number {
      return live.size;
    },
    start(): void {
      const patchedSet = (
        callback: (...args: unknown[]) => void,
        ms?: number,
        ...args: unknown[]
      ) => {
        state.created++;
        const timer = originalSet(
          (...a: unknown[]) => {
            live.delete(timer);
            callback(...a);
          },
          ms,
          ...args,
        );
        live.add(timer);
        if (live.size > state.peak) state.peak = live.size;
        return timer;
      };
      globalThis.setTimeout = Object.assign(patchedSet, originalSet);
      globalThis.clearTimeout = (timer?: NodeJS.Timeout | string | number) => {
        live.delete(timer);
        originalClear(timer);
      };
    },
    stop(): void {
      globalThis.setTimeout = originalSet;
      globalThis.clearTimeout = originalClear;
    },
  };
  return state;
}

function writeSyscalls(): number {
  try {
    return Number(/syscw:\s*(\d+)/.exec(readFileSync('/proc/self/io', 'utf8'))?.[1] ?? NaN);
  } catch {
    return NaN;
  }
}

export interface S6HeldResult {
  locks: number;
  ttlMs: number;
  holdMs: number;
  periods: number;
  acquireSeconds: number;
  heapPerLockBytes: number;
  /** EVALSHA calls during the hold (a batched renewal renews many locks per call). */
  renewalCommands: number;
  renewalCommandsPerPeriod: number;
  /** Bursts of renewal commands seen by sampling INFO commandstats every `sampleMs`. */
  renewalBursts: number;
  /** Share of the samples in which renewal commands ran (batched renewal: short bursts, quiet between). */
  renewalActiveShare: number;
  burstSizes: number[];
  sampleMs: number;
  /** process.getActiveResourcesInfo() 'Timeout' entries (ref'ed timers only): median / max. */
  activeTimeoutsMedian: number;
  activeTimeoutsMax: number;
  /** Every live timer, unref'ed ones included (setTimeout/clearTimeout counted): median of the samples / exact peak. */
  liveTimersMedian: number;
  liveTimersMax: number;
  /** CPU of this process during the hold, % of one core. */
  holdCpuPercent: number;
  /** write()/writev() syscalls of this process during the hold (/proc/self/io syscw; NaN elsewhere). */
  writeSyscalls: number;
  /** Timers created while holding, per renewal command. */
  timersCreatedPerRenewal: number;
  lost: number;
  releasedOk: number;
}

/**
 * S6b: `count` locks held at once with a short lease, for three renewal periods (lease / 3 each):
 * renewal commands counted by INFO commandstats (evalsha calls while nothing else runs), timers
 * observed with process.getActiveResourcesInfo() and by counting setTimeout/clearTimeout calls.
 */
export async function s6Held(url: string, count: number, ttlMs = 900): Promise<S6HeldResult> {
  const stats = new Redis(url);
  // Losses are counted through the 'lost' event; one warning line each would flood the output.
  Logger.overrideLogger(['error', 'fatal']);
  const locks = new LockService({ redis: url, prefix: 'bench:s6held:', ttl: ttlMs });
  let lost = 0;
  locks.on('lost', () => void lost++);
  const timers = trackTimers();
  const run = Math.random().toString(36).slice(2, 8);
  try {
    await (await locks.acquire(`warm:${run}`)).release();
    gc();
    const heapBefore = process.memoryUsage().heapUsed;
    timers.start();
    const t0 = nowUs();
    // In chunks: a lease is counted from when its acquire was sent, so 10 k acquires sent in one
    // burst can outlive a 900 ms lease before their replies are all processed.
    const held: LockHandle[] = [];
    for (let from = 0; from < count; from += 500) {
      const chunk = Array.from({ length: Math.min(500, count - from) }, (_, i) =>
        locks.acquire(`held:${run}:${from + i}`),
      );
      held.push(...(await Promise.all(chunk)));
    }
    const acquireSeconds = (nowUs() - t0) / 1e6;
    gc();
    const heapPerLockBytes = (process.memoryUsage().heapUsed - heapBefore) / count;

    const periods = 3;
    const holdMs = periods * (ttlMs / 3);
    const sampleMs = 10;
    const before = (await commandStats(stats)).evalsha ?? 0;
    const timeline: number[] = [before];
    const activeTimeouts: number[] = [];
    const live: number[] = [];
    const createdBefore = timers.created;
    timers.peak = timers.live;
    const cpu0 = process.cpuUsage();
    const writes0 = writeSyscalls();
    const holdEnd = nowUs() + holdMs * 1_000;
    while (nowUs() < holdEnd) {
      await sleep(sampleMs);
      activeTimeouts.push(process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length);
      live.push(timers.live);
      timeline.push((await commandStats(stats)).evalsha ?? 0);
    }
    const timersCreated = timers.created - createdBefore;
    const cpu = process.cpuUsage(cpu0);
    const writes = writeSyscalls() - writes0;
    const peakTimers = timers.peak;
    // commandstats' own INFO calls are not evalsha; nothing else runs evalsha meanwhile.
    const renewalCommands = timeline[timeline.length - 1] - before;
    const bursts: number[] = [];
    let current = 0;
    for (let i = 1; i < timeline.length; i++) {
      const delta = timeline[i] - timeline[i - 1];
      if (delta > 0) current += delta;
      else if (current > 0) {
        bursts.push(current);
        current = 0;
      }
    }
    if (current > 0) bursts.push(current);

    const released = await Promise.all(held.map((lock) => lock.release()));
    return {
      locks: count,
      ttlMs,
      holdMs,
      periods,
      acquireSeconds,
      heapPerLockBytes,
      renewalCommands,
      renewalCommandsPerPeriod: renewalCommands / periods,
      renewalBursts: bursts.length,
      renewalActiveShare:
        timeline.slice(1).filter((v, i) => v > timeline[i]).length /
        Math.max(1, timeline.length - 1),
      burstSizes: bursts,
      sampleMs,
      activeTimeoutsMedian: median(activeTimeouts),
      activeTimeoutsMax: Math.max(...activeTimeouts),
      liveTimersMedian: median(live),
      liveTimersMax: peakTimers,
      holdCpuPercent: ((cpu.user + cpu.system) / 1_000 / holdMs) * 100,
      writeSyscalls: writes,
      // The sampling loop's own sleep timers are not the library's.
      timersCreatedPerRenewal:
        renewalCommands > 0 ? (timersCreated - activeTimeouts.length) / renewalCommands : NaN,
      lost,
      releasedOk: released.filter(Boolean).length,
    };
  } finally {
    timers.stop();
    await locks.close();
    stats.disconnect();
    Logger.overrideLogger(['log', 'error', 'warn', 'debug', 'verbose', 'fatal']);
  }
}
