import { randomUUID } from 'node:crypto';
import { countCommands } from './commands';
import type { Contender, Session } from './contenders';
import { percentile, nowUs } from './stats';

export interface S1Metrics extends Record<string, number> {
  opsPerSec: number;
  p50Us: number;
  p99Us: number;
  /** CPU time of this Node process per op (user + system, µs): the client-side cost. */
  cpuUsPerOp: number;
}

/** Opens one session per contender (all kept open, so the runs can be interleaved finely). */
async function openAll(contenders: Contender[], url: string): Promise<Session[]> {
  const sessions: Session[] = [];
  try {
    for (const c of contenders) sessions.push(await c.open(url));
  } catch (error) {
    await Promise.allSettled(sessions.map((s) => s.close()));
    throw error;
  }
  return sessions;
}

/**
 * S1, one repetition: acquire + release of a fresh key, `ops` times per contender, in a row. The
 * contenders take turns every `block` operations, so a load change on the machine hits all alike.
 */
export async function s1Interleaved(
  contenders: Contender[],
  url: string,
  ops: number,
  block = 250,
): Promise<S1Metrics[]> {
  const sessions = await openAll(contenders, url);
  const run = randomUUID().slice(0, 8);
  try {
    const latencies = contenders.map(() => new Float64Array(ops));
    const elapsed = contenders.map(() => 0);
    const cpu = contenders.map(() => 0);
    for (let s = 0; s < sessions.length; s++) {
      for (let i = 0; i < 300; i++)
        await (await sessions[s].acquire(`s1:${run}:warm:${s}:${i}`)).release();
    }
    for (let done = 0; done < ops; done += block) {
      for (let s = 0; s < sessions.length; s++) {
        const session = sessions[s];
        const until = Math.min(ops, done + block);
        const cpu0 = process.cpuUsage();
        const started = nowUs();
        for (let i = done; i < until; i++) {
          const t0 = nowUs();
          const held = await session.acquire(`s1:${run}:${s}:${i}`);
          await held.release();
          latencies[s][i] = nowUs() - t0;
        }
        elapsed[s] += nowUs() - started;
        const used = process.cpuUsage(cpu0);
        cpu[s] += used.user + used.system;
      }
    }
    return contenders.map((_, s) => {
      const values = Array.from(latencies[s]);
      return {
        opsPerSec: ops / (elapsed[s] / 1e6),
        p50Us: percentile(values, 50),
        p99Us: percentile(values, 99),
        cpuUsPerOp: cpu[s] / ops,
      };
    });
  } finally {
    await Promise.allSettled(sessions.map((s) => s.close()));
  }
}

/** What MONITOR saw per S1 acquire + release: commands sent, and commands run inside Lua. */
export interface S1Commands {
  /** Commands clients sent per op (= round trips, the loop being sequential). */
  perOp: number;
  byCommand: Record<string, number>;
  /** Commands scripts ran inside Redis per op; absent in runs from before they were counted. */
  luaPerOp?: number;
  luaByCommand?: Record<string, number>;
}

/** Commands per S1 acquire + release, by MONITOR over `ops` sampled iterations. */
export async function s1RoundTrips(
  contender: Contender,
  url: string,
  ops = 200,
): Promise<S1Commands> {
  const session = await contender.open(url);
  const run = randomUUID().slice(0, 8);
  try {
    for (let i = 0; i < 20; i++) await (await session.acquire(`s1rt:${run}:warm:${i}`)).release();
    const count = await countCommands(url, async () => {
      for (let i = 0; i < ops; i++) await (await session.acquire(`s1rt:${run}:${i}`)).release();
    });
    const perOp = (counts: Record<string, number>): Record<string, number> =>
      Object.fromEntries(Object.entries(counts).map(([name, n]) => [name, n / ops]));
    return {
      perOp: count.total / ops,
      byCommand: perOp(count.byCommand),
      luaPerOp: count.luaTotal / ops,
      luaByCommand: perOp(count.luaByCommand),
    };
  } finally {
    await session.close();
  }
}

export interface S2Metrics extends Record<string, number> {
  opsPerSec: number;
  p50Us: number;
  p99Us: number;
}

/**
 * S2, one repetition: `loops` concurrent loops, each on its own key, `ms` per contender, given in
 * slices of `sliceMs` that the contenders take in turns (each slice has an untimed 50 ms lead-in).
 */
export async function s2Interleaved(
  contenders: Contender[],
  url: string,
  loops: number,
  ms: number,
  sliceMs = 500,
): Promise<S2Metrics[]> {
  const sessions = await openAll(contenders, url);
  const run = randomUUID().slice(0, 8);
  const leadInUs = 50_000;
  const latencies: number[][] = contenders.map(() => []);
  const timedUs = contenders.map(() => 0);
  try {
    for (let done = 0; done < ms; done += sliceMs) {
      const slice = Math.min(sliceMs, ms - done);
      for (let s = 0; s < sessions.length; s++) {
        const session = sessions[s];
        const start = nowUs() + leadInUs;
        const end = start + slice * 1_000;
        await Promise.all(
          Array.from({ length: loops }, async (_, loop) => {
            const key = `s2:${run}:${s}:${loop}`;
            for (;;) {
              const t0 = nowUs();
              if (t0 >= end) return;
              const held = await session.acquire(key);
              await held.release();
              const t1 = nowUs();
              if (t0 >= start && t1 <= end) latencies[s].push(t1 - t0);
            }
          }),
        );
        timedUs[s] += slice * 1_000;
      }
    }
    return contenders.map((_, s) => ({
      opsPerSec: latencies[s].length / (timedUs[s] / 1e6),
      p50Us: percentile(latencies[s], 50),
      p99Us: percentile(latencies[s], 99),
    }));
  } finally {
    await Promise.allSettled(sessions.map((s) => s.close()));
  }
}
