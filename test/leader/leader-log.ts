/**
 * Reads what leader workers (fixtures/leader-worker.ts) printed: the monitor's record of who
 * believed it led, when, and in which term — and the checks of the leader-election tests.
 */

export interface Belief {
  readonly worker: number;
  readonly term: number;
  /** The first and last tick of this worker as leader in this term (ms, one clock for all). */
  readonly from: number;
  readonly to: number;
}

export interface LeaderEvent {
  readonly worker: number;
  readonly what: 'elected' | 'revoked';
  readonly term: number;
  readonly reason?: string;
  readonly at: number;
}

/** Each worker's ticks, folded into one interval per (worker, term). */
export function beliefsOf(outputs: readonly string[]): Belief[] {
  const beliefs = new Map<string, { worker: number; term: number; from: number; to: number }>();
  outputs.forEach((output, worker) => {
    for (const [, term, at] of output.matchAll(/^tick (\d+) ([\d.]+)$/gm)) {
      const key = `${worker}:${term}`;
      const time = Number(at);
      const belief = beliefs.get(key);
      if (belief) belief.to = Math.max(belief.to, time);
      else beliefs.set(key, { worker, term: Number(term), from: time, to: time });
    }
  });
  return [...beliefs.values()].sort((a, b) => a.from - b.from);
}

/** Pairs of beliefs of different workers whose intervals overlap: two leaders at once. */
export function overlaps(beliefs: readonly Belief[]): [Belief, Belief][] {
  const found: [Belief, Belief][] = [];
  for (let i = 0; i < beliefs.length; i++) {
    for (let j = i + 1; j < beliefs.length; j++) {
      const [a, b] = [beliefs[i]!, beliefs[j]!];
      if (a.worker !== b.worker && a.from < b.to && b.from < a.to) found.push([a, b]);
    }
  }
  return found;
}

export function eventsOf(outputs: readonly string[]): LeaderEvent[] {
  const events: LeaderEvent[] = [];
  outputs.forEach((output, worker) => {
    for (const [, what, term, reason, at] of output.matchAll(
      /^(elected|revoked) (\d+)(?: (\S+))? ([\d.]+)$/gm,
    )) {
      events.push({
        worker,
        what: what as LeaderEvent['what'],
        term: Number(term),
        reason,
        at: Number(at),
      });
    }
  });
  return events.sort((a, b) => a.at - b.at);
}

export { hostNow } from '../support/host-clock';
