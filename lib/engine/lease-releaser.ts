import type { FairLockBackend, LockBackend } from '../backends/lock-backend';
import { traitsOf } from '../keys/lease-kind';
import type { HeldLock } from './held-lock';
import type { ReleaseNotifier } from './release-notifier';
import { refusedUnrun } from '../redis/reply-error';
import { retryPause } from './backoff';
import { monotonicNow } from '../util/clock';
import { settled } from '../util/settled';

/** A backend command bounded by `commandTimeout`, `subject` naming it for a refusal's message. */
type Bounded = <T>(command: Promise<T>, operation: string, subject: string) => Promise<T>;

/**
 * Releases held locks: compare-and-delete, or in fair mode a release that hands the lock to the
 * next in line. A release Redis refused unrun (a slot in migration) is sent again until it is
 * answered or the lock's deadline passes — after that its key has expired by itself.
 */
export class LeaseReleaser {
  constructor(
    private readonly backend: LockBackend,
    /** Set in fair mode. */
    private readonly fairBackend: FairLockBackend | undefined,
    private readonly notifier: ReleaseNotifier,
    private readonly bounded: Bounded,
  ) {}

  release(lock: HeldLock): Promise<boolean> {
    const release = (free: () => Promise<boolean>): Promise<boolean> =>
      retryRefused(
        () => this.bounded(free(), 'release', `lock "${lock.key}"`),
        () => lock.validUntil,
      );
    const { fairBackend, notifier } = this;
    const traits = traitsOf(lock.redisKeys.kind);
    if (fairBackend && traits.queuesWhenFair) {
      // The release script hands the lock (or the permit) to the next in line itself: no local
      // hand-off.
      return release(() => fairBackend.fairRelease(lock.redisKeys, lock.token));
    }
    if (!traits.releaseFreesPlace) {
      // A reader's share: the release wakes the writers by its message when the last reader
      // leaves (none is due before: no local hand-off).
      return release(() => this.backend.release(lock.redisKeys, lock.token));
    }
    // A waiter in this process is woken when Redis answers, unless the release message was first.
    notifier.releaseSent(lock.token);
    return release(() => this.backend.release(lock.redisKeys, lock.token)).then(
      (deleted) => {
        notifier.releaseAnswered(lock.redisKeys.channel, lock.token, deleted);
        return deleted;
      },
      (error: unknown) => {
        notifier.releaseAnswered(lock.redisKeys.channel, lock.token, false);
        throw error;
      },
    );
  }
}

/**
 * Runs `attempt` again, with backoff, while Redis refuses it unrun — a Cluster slot in migration
 * answers TRYAGAIN to a script whose keys are split between the two nodes until the move
 * completes — and until `until()` (monotonic ms) would pass. A failure after which the command
 * may have run (a timeout, a lost connection), or any other, is thrown at once: sending it again
 * could run it twice.
 */
function retryRefused<T>(attempt: () => Promise<T>, until: () => number): Promise<T> {
  // A promise chain, not an async loop: one layer on a path every release takes.
  const from = (failures: number): Promise<T> =>
    settled(attempt).catch((error: unknown) => {
      const pause = retryPause(failures);
      if (!refusedUnrun(error) || monotonicNow() + pause >= until()) throw error;
      return new Promise((resolve) => setTimeout(resolve, pause)).then(() => from(failures + 1));
    });
  return from(0);
}
