import type { FairLockBackend, LockBackend } from '../backends/lock-backend';
import { traitsOf } from '../keys/lease-kind';
import type { HeldLock } from './held-lock';
import type { ReleaseNotifier } from './release-notifier';
import { retryRefused } from './retry-refused';

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
