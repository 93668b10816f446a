import type { Session } from './contenders';
import { jain, max, percentile, nowUs, sleep } from './stats';

/** One critical section, timestamps in µs on the machine-wide monotonic clock. */
export interface HoldRecord {
  worker: number;
  /** acquire() called. */
  waitStart: number;
  /** acquire() resolved. */
  acquired: number;
  /** release() called (the critical section ended). */
  releaseCalled: number;
  /** release() resolved. */
  released: number;
  /** Times the library gave up (rejected) before this acquisition succeeded; the worker retried. */
  giveUps: number;
}

export interface ContendedPlan {
  key: string;
  /** µs, nowUs() clock: when workers start, and after which they start no new acquisition. */
  startAt: number;
  endAt: number;
  criticalMs: number;
  pauseMs: number;
}

/**
 * One worker: acquire → 1 ms critical section → release → optional pause, until the end of the
 * plan. A library that gives up is asked again at once (the wait keeps counting from the first ask).
 */
export async function runWorker(
  session: Session,
  worker: number,
  plan: ContendedPlan,
  records: HoldRecord[],
  errors: string[],
): Promise<void> {
  const untilStart = (plan.startAt - nowUs()) / 1_000;
  if (untilStart > 0) await sleep(untilStart);
  while (nowUs() < plan.endAt) {
    const waitStart = nowUs();
    let giveUps = 0;
    let held;
    for (;;) {
      try {
        held = await session.acquire(plan.key);
        break;
      } catch (error) {
        giveUps++;
        if (errors.length < 5)
          errors.push(error instanceof Error ? `${error.name}: ${error.message}` : String(error));
        // A library that keeps failing at once (not waiting) must not spin the CPU.
        if (nowUs() - waitStart > 60_000_000) throw new Error(`worker ${worker}: no lock in 60 s`);
      }
    }
    const acquired = nowUs();
    await sleep(plan.criticalMs);
    const releaseCalled = nowUs();
    await held.release();
    const released = nowUs();
    records.push({ worker, waitStart, acquired, releaseCalled, released, giveUps });
    if (plan.pauseMs > 0) await sleep(plan.pauseMs);
  }
}

export interface ContendedMetrics extends Record<string, number> {
  sectionsPerSec: number;
  crossShare: number;
  gapP50: number;
  gapP99: number;
  /** release() called → resolved, p50 (a release that wakes a herd of waiters gets slower). */
  releaseP50: number;
  waitP50: number;
  waitP99: number;
  waitMax: number;
  waitsOver1s: number;
  fairMinMax: number;
  jain: number;
  violations: number;
  giveUps: number;
  sections: number;
}

/** Hand-offs, waits, fairness and exclusion from the merged records of all workers (ms). */
export function analyze(
  records: HoldRecord[],
  plan: ContendedPlan,
  workers: number,
): ContendedMetrics {
  const sorted = [...records].sort((a, b) => a.acquired - b.acquired);
  let violations = 0;
  let lastReleaseCalled = -Infinity;
  const gaps: number[] = [];
  let cross = 0;
  for (let i = 0; i < sorted.length; i++) {
    const r = sorted[i];
    // Exclusion holds iff each grant resolves after every earlier holder called release().
    if (r.acquired < lastReleaseCalled) violations++;
    lastReleaseCalled = Math.max(lastReleaseCalled, r.releaseCalled);
    if (i > 0) {
      const previous = sorted[i - 1];
      if (previous.worker !== r.worker) {
        cross++;
        gaps.push((r.acquired - previous.released) / 1_000);
      }
    }
  }
  const waits = sorted.map((r) => (r.acquired - r.waitStart) / 1_000);
  const inWindow = sorted.filter((r) => r.acquired <= plan.endAt);
  const perWorker = new Array<number>(workers).fill(0);
  for (const r of inWindow) perWorker[r.worker]++;
  const durationS = (plan.endAt - plan.startAt) / 1e6;
  return {
    sectionsPerSec: inWindow.length / durationS,
    crossShare: sorted.length > 1 ? cross / (sorted.length - 1) : NaN,
    gapP50: percentile(gaps, 50),
    gapP99: percentile(gaps, 99),
    releaseP50: percentile(
      sorted.map((r) => (r.released - r.releaseCalled) / 1_000),
      50,
    ),
    waitP50: percentile(waits, 50),
    waitP99: percentile(waits, 99),
    waitMax: max(waits),
    waitsOver1s: waits.filter((w) => w > 1_000).length,
    fairMinMax: Math.min(...perWorker) / Math.max(1, Math.max(...perWorker)),
    jain: jain(perWorker),
    violations,
    giveUps: sorted.reduce((sum, r) => sum + r.giveUps, 0),
    sections: sorted.length,
  };
}
