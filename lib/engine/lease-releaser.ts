import type { FairLockBackend, LockBackend } from '../backends/lock-backend';
import { traitsOf } from '../keys/lease-kind';
import type { HeldLock } from './held-lock';
import type { ReleaseNotifier } from './release-notifier';
import { refusedUnrun } from '../redis/reply-error';
import { retryPause } from './backoff';
import { monotonicNow } from '../util/clock';
import type { Bounded } from '../util/command-deadlines';

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

  /** Releases `lock`, resolving what `settle` makes of whether it was still ours. */
  release<R>(lock: HeldLock, settle: (deleted: boolean) => R): Promise<R> {
    const { fairBackend, notifier } = this;
    const traits = traitsOf(lock.redisKeys.kind);
    if (fairBackend && traits.queuesWhenFair) {
      // The release script hands the lock (or the permit) to the next in line itself: no local
      // hand-off.
      return this.send(lock, () => fairBackend.fairRelease(lock.redisKeys, lock.token), settle);
    }
    const free = () => this.backend.release(lock.redisKeys, lock.token);
    // A reader's share: the release wakes the writers by its message when the last reader leaves
    // (none is due before: no local hand-off).
    if (!traits.releaseFreesPlace) return this.send(lock, free, settle);
    // A waiter in this process is woken when Redis answers, unless the release message was first.
    notifier.releaseSent(lock.token);
    return this.send(lock, free, settle, (deleted) =>
      notifier.releaseAnswered(lock.redisKeys.channel, lock.token, deleted),
    );
  }

  /**
   * Sends `free()`, bounded, again with backoff while Redis refuses it unrun — a Cluster slot in
   * migration answers TRYAGAIN to a script whose keys are split between the two nodes until the
   * move completes — and until the lock's deadline would pass (its key has expired by then). A
   * failure after which the command may have run (a timeout, a lost connection), or any other, is
   * thrown at once: sending it again could run it twice. `answered` hears the outcome (false for
   * a failure), and `settle` maps it, in the same step: one layer on a path every release takes.
   */
  private send<R>(
    lock: HeldLock,
    free: () => Promise<boolean>,
    settle: (deleted: boolean) => R,
    answered?: (deleted: boolean) => void,
  ): Promise<R> {
    const subject = (): string => `lock "${lock.key}"`;
    const from = (failures: number): Promise<R> =>
      this.bounded(
        free(),
        'release',
        subject,
        (deleted) => {
          answered?.(deleted);
          return settle(deleted);
        },
        (error: unknown) => {
          const pause = retryPause(failures);
          if (!refusedUnrun(error) || monotonicNow() + pause >= lock.validUntil) {
            answered?.(false);
            throw error;
          }
          return new Promise((resolve) => setTimeout(resolve, pause)).then(() =>
            from(failures + 1),
          );
        },
      );
    return from(0);
  }
}
