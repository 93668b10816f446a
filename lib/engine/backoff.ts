import { RedisUnavailableError } from '../errors/errors';
import type { ConnectionWatch } from '../redis/connection-watch';
import { monotonicNow } from '../util/clock';

/**
 * The pause before the first retry of a command Redis did not serve (out of reach, or a slot in
 * migration). Short, because most such gaps are brief — a reconnect, a failover's promotion — and
 * a waiting caller should see the lock again soon after; long enough that a client still
 * reconnecting is not flooded with commands it can only queue.
 */
export const FIRST_RETRY_PAUSE_MS = 50;

/**
 * The longest pause between retries, however many failed before. A Redis restart or a failover
 * can take seconds: capped at one second, a caller still notices the recovery within a second,
 * while a long outage costs about one command per second per waiting call.
 */
export const MAX_RETRY_PAUSE_MS = 1_000;

/** The pause before the next retry, after `failures` failed ones: doubling, within the cap. */
export function retryPause(failures: number): number {
  return Math.min(FIRST_RETRY_PAUSE_MS * 2 ** failures, MAX_RETRY_PAUSE_MS);
}

/**
 * Whether an acquire try's `error` is worth another try after a backoff pause: Redis out of reach
 * (a failover, a restart) while the call's budget (`deadline`, monotonic) lasts. Returns it to be
 * remembered (thrown if it still holds when the budget runs out); throws anything else at once —
 * also an unreachable Redis that never connected or turned the client away for good
 * (credentials), where waiting will not help.
 */
export function unavailableWorthRetrying(
  error: unknown,
  connections: Pick<ConnectionWatch, 'unavailable'>,
  deadline: number,
): RedisUnavailableError {
  if (!(error instanceof RedisUnavailableError) || monotonicNow() >= deadline) throw error;
  if (connections.unavailable()) throw error;
  return error;
}
