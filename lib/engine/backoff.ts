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
