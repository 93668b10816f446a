/**
 * Milliseconds on the host's monotonic clock (`process.hrtime`, CLOCK_MONOTONIC on Linux): one
 * clock for every process on the machine, so timestamps from several worker processes compare
 * directly. `performance.timeOrigin + performance.now()` does not: each process fixes its
 * `timeOrigin` from the wall clock as it starts, and on a loaded machine two processes' origins
 * can disagree by several milliseconds — enough to show an overlap that never happened.
 */
export function hostNow(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}
