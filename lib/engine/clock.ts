import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';

/**
 * Monotonic milliseconds. Lease deadlines are kept on this clock, never `Date.now()`, so a wall
 * clock step (NTP, a VM resume, a user changing the time) cannot stretch or shrink a lease.
 */
export const monotonicNow = (): number => performance.now();

/**
 * Safety margin subtracted from a lease on the local clock, as Redlock does: clocks drift, and the
 * lease starts on Redis a little after we sent the command.
 */
export const clockDrift = (ttl: number): number => Math.floor(ttl * 0.01) + 2;

let pool = Buffer.alloc(0);
let offset = 0;

/**
 * A fresh 128-bit owner token from the CSPRNG, hex-encoded. Tokens are drawn from a pooled buffer
 * (as `crypto.randomUUID` does) to keep one syscall off the acquire path.
 */
export function newToken(): string {
  if (offset + 16 > pool.length) {
    pool = randomBytes(4096);
    offset = 0;
  }
  const token = pool.toString('hex', offset, offset + 16);
  offset += 16;
  return token;
}
