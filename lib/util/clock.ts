import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';

/** Where time comes from. Replaced only by tests (`useClockSource`), to simulate a suspended host. */
export interface ClockSource {
  /** Monotonic ms (`performance.now()`): never steps, but stops while the host is suspended. */
  monotonic(): number;
  /** Wall-clock ms (`Date.now()`): catches up after a suspension, and can be stepped either way. */
  wall(): number;
}

const systemClock: ClockSource = { monotonic: () => performance.now(), wall: () => Date.now() };
let source = systemClock;

/**
 * Monotonic milliseconds. Lease deadlines are kept on this clock, never `Date.now()`, so a wall
 * clock step (NTP, a user changing the time) cannot stretch a lease. Each reading also watches
 * the wall clock for a jump ahead (see `suspendedSince`).
 */
export function monotonicNow(): number {
  const now = source.monotonic();
  watchWallClock(now);
  return now;
}

/**
 * Monotonic milliseconds without the wall-clock watch, for durations and budgets only (a wait, a
 * hold's length, a reading that `suspendedSince` follows at once): half the cost of
 * `monotonicNow`. Never for when a lease was confirmed: a jump before that must be seen first.
 */
export function monotonicElapsed(): number {
  return source.monotonic();
}

/**
 * A jump of the wall clock ahead of the monotonic one smaller than this is noise: `Date.now()`
 * has whole milliseconds, and a reading can be preempted between the two clocks.
 */
const JUMP_TOLERANCE = 10;
/** `Date.now() - performance.now()` at the last reading. */
let lastOffset: number | undefined;
/** The wall clock (ms) at the last reading. */
let lastWall = 0;
/** Forward jumps seen, oldest first: when (monotonic) they were seen, and by how many ms. */
const jumps: { at: number; ms: number }[] = [];
const MAX_JUMPS = 64;

/**
 * The monotonic clock stops while the host is suspended (a laptop's lid, a paused VM, a restored
 * snapshot) but Redis' clock does not; the wall clock then jumps ahead of the monotonic one by
 * about the time that passed unseen. A step of the wall clock backwards only moves the baseline:
 * it never gives a lease time back.
 */
function watchWallClock(monotonic: number): void {
  const wall = source.wall();
  lastWall = wall;
  const offset = wall - monotonic;
  if (lastOffset === undefined || offset <= lastOffset + JUMP_TOLERANCE) {
    lastOffset = offset;
    return;
  }
  // Read again, tightly, so a reading preempted between the two clocks is not taken for a jump.
  const before = source.monotonic();
  const again = source.wall();
  const after = source.monotonic();
  if (after - before > 1) return; // preempted again: judge on a later reading
  const confirmed = again - (before + after) / 2;
  if (confirmed > lastOffset + JUMP_TOLERANCE) {
    jumps.push({ at: monotonic, ms: confirmed - lastOffset });
    const [first, second] = jumps;
    if (jumps.length > MAX_JUMPS && first && second) {
      // Merge the oldest two, counting both from the later one: a lock may lose lease time it
      // still had, never keep time it did not.
      jumps.splice(0, 2, { at: second.at, ms: first.ms + second.ms });
    }
  }
  lastOffset = confirmed;
}

/**
 * Milliseconds of wall-clock time that passed after monotonic time `since` without the monotonic
 * clock counting them (the host was suspended, or the wall clock was stepped ahead): time Redis
 * saw pass, so a lease confirmed at `since` has that much less left.
 */
export function suspendedSince(since: number): number {
  watchWallClock(source.monotonic());
  let total = 0;
  // A full pass: there are MAX_JUMPS at most.
  for (const jump of jumps) if (jump.at > since) total += jump.ms;
  return total;
}

/**
 * Replaces the clocks; without an argument, restores the system's. For tests only: a suspended
 * host cannot be simulated with real time.
 * @internal
 */
export function useClockSource(next: ClockSource = systemClock): void {
  source = next;
  lastOffset = undefined;
  jumps.length = 0;
}

/**
 * Longest duration Node's timers can wait (about 24.8 days): a larger one fires after 1 ms, which
 * would turn a lease renewal or a retry into a busy loop.
 */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Safety margin subtracted from a lease on the local clock, as Redlock does: clocks drift, and the
 * lease starts on Redis a little after we sent the command.
 */
export const clockDrift = (ttl: number): number => Math.floor(ttl * 0.01) + 2;

/** Redlock's default share of the lease kept as drift margin (`redlock.driftFactor`). */
export const REDLOCK_DRIFT_FACTOR = 0.01;

/** Redlock's drift margin: `ttl × driftFactor + 2` ms (its nodes' clocks drift independently). */
export const redlockDrift = (ttl: number, driftFactor: number): number => ttl * driftFactor + 2;

/**
 * Whether `ms` is a lease the local clock can count on: a whole number of ms that leaves time once
 * the drift margin `drift(ms)` is taken off its end. A shorter one would be lost as it is granted.
 */
export const isUsableLease = (ms: number, drift: (ttl: number) => number): boolean =>
  Number.isInteger(ms) && ms - drift(ms) > 0;

/**
 * The shortest usable lease (see `isUsableLease`) for the drift margin `drift`, or `Infinity` when
 * not even the longest a timer can wait leaves time. The margin grows slower than the lease.
 */
export function shortestLease(drift: (ttl: number) => number): number {
  if (!isUsableLease(MAX_TIMER_MS, drift)) return Infinity;
  let low = 1;
  let high = MAX_TIMER_MS; // usable
  while (low < high) {
    const middle = Math.floor((low + high) / 2);
    if (isUsableLease(middle, drift)) high = middle;
    else low = middle + 1;
  }
  return low;
}

/**
 * The token of a grant that carries who holds it: `"<128-bit hex> <since ms> <instance id>"`, since
 * on this process's wall clock when the try was sent. It is the lock's value, compared whole, so
 * inspection reads the holder from the lock itself and a grant writes no record beside it.
 */
export function newHolderToken(instanceId: string, since: number = source.wall()): string {
  return `${newToken()} ${Math.floor(since)} ${instanceId}`;
}

/**
 * The wall clock (ms) as the last `monotonicNow()` read it: a try that reads when it was sent
 * takes its holder's `since` from the same reading (`newHolderToken`), not from another.
 */
export function wallAtLastReading(): number {
  return lastWall;
}

/** Random bytes from the CSPRNG, as hex, drawn 4 KB at a time; `offset` is the next unused char. */
let pool = '';
let offset = 0;

/**
 * A fresh 128-bit owner token from the CSPRNG, hex-encoded. Tokens are cut from a pool of random
 * bytes encoded once (as `crypto.randomUUID` pools its bytes): one syscall and one encoding per
 * 256 tokens, not one per acquire.
 */
export function newToken(): string {
  if (offset + 32 > pool.length) {
    pool = randomBytes(4096).toString('hex');
    offset = 0;
  }
  const token = pool.slice(offset, offset + 32);
  offset += 32;
  return token;
}
