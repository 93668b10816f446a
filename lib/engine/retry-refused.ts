import { refusedUnrun } from '../redis/reply-error';
import { retryPause } from './backoff';
import { monotonicNow } from '../util/clock';
import { settled } from '../util/settled';

/**
 * Runs `attempt` again, with backoff, while Redis refuses it unrun — a Cluster slot in migration
 * answers TRYAGAIN to a script whose keys are split between the two nodes until the move
 * completes — and until `until()` (monotonic ms) would pass. A failure after which the command
 * may have run (a timeout, a lost connection), or any other, is thrown at once: sending it again
 * could run it twice.
 */
export function retryRefused<T>(attempt: () => Promise<T>, until: () => number): Promise<T> {
  // A promise chain, not an async loop: one layer on a path every release takes.
  const from = (failures: number): Promise<T> =>
    settled(attempt).catch((error: unknown) => {
      const pause = retryPause(failures);
      if (!refusedUnrun(error) || monotonicNow() + pause >= until()) throw error;
      return new Promise((resolve) => setTimeout(resolve, pause)).then(() => from(failures + 1));
    });
  return from(0);
}
