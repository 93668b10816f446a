/** Small statistics helpers; inputs are plain arrays of numbers. */

export function percentile(values: number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = Float64Array.from(values).sort();
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank];
}

export function median(values: number[]): number {
  const finite = values.filter((v) => Number.isFinite(v));
  if (finite.length === 0) return NaN;
  const sorted = [...finite].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

export function mean(values: number[]): number {
  return values.length === 0 ? NaN : values.reduce((a, b) => a + b, 0) / values.length;
}

export function max(values: number[]): number {
  return values.length === 0 ? NaN : values.reduce((a, b) => (b > a ? b : a), -Infinity);
}

/** Jain's fairness index: 1 = perfectly even, 1/n = one worker got everything. */
export function jain(counts: number[]): number {
  const sum = counts.reduce((a, b) => a + b, 0);
  const squares = counts.reduce((a, b) => a + b * b, 0);
  return squares === 0 ? NaN : (sum * sum) / (counts.length * squares);
}

/** Monotonic microseconds, shared by every process on this machine (CLOCK_MONOTONIC). */
export function nowUs(): number {
  return Number(process.hrtime.bigint()) / 1_000;
}

export const sleep = (ms: number): Promise<void> =>
  new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Medians of each numeric field over repetitions; `sumFields` are summed (counts such as
 * violations must never be hidden by a median) and `maxFields` take the worst repetition.
 */
export function combine<T extends Record<string, number>>(
  runs: T[],
  sumFields: string[] = [],
  maxFields: string[] = [],
): T {
  const out = {} as Record<string, number>;
  if (runs.length === 0) return out as T;
  for (const field of Object.keys(runs[0])) {
    const values = runs.map((r) => r[field]);
    if (sumFields.includes(field)) out[field] = values.reduce((a, b) => a + b, 0);
    else if (maxFields.includes(field)) out[field] = max(values);
    else out[field] = median(values);
  }
  return out as T;
}
