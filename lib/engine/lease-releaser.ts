import type { FairLockBackend, LockBackend } from '../backends/lock-backend';
import { traitsOf } from '../keys/lease-kind';
import type { HeldLock } from './held-lock';
import type { ReleaseNotifier } from './release-notifier';
import { refusedUnrun } from '../redis/reply-error';
import { retryPause } from './backoff';
import { monotonicNow } from '../util/clock';
import type { Bounded } from '../util/command-deadlines';
import { settled } from '../util/settled';

/** A release held back by `together` until the set it belongs to is sent as one command. */
interface HeldBackRelease {
  readonly lock: HeldLock;
  settle(deleted: boolean): unknown;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

/**
 * Releases held locks: compare-and-delete, or in fair mode a release that hands the lock to the
 * next in line. A release Redis refused unrun (a slot in migration) is sent again until it is
 * answered or the lock's deadline passes — after that its key has expired by itself.
 */
export class LeaseReleaser {
  /** Set while `together` runs: the plain releases it starts, to be sent as one. */
  private heldBack?: HeldBackRelease[];

  constructor(
    private readonly backend: LockBackend,
    /** Set in fair mode. */
    private readonly fairBackend: FairLockBackend | undefined,
    private readonly notifier: ReleaseNotifier,
    private readonly bounded: Bounded,
  ) {}

  /**
   * Runs `release`, which releases a multi-key set: the plain compare-and-delete releases it
   * starts (not fair mode's hand-offs) go to the store as one command where it has one
   * (`releaseAll`), so a set costs one round trip and one script, as it cost one to take.
   */
  together<T>(release: () => T): T {
    if (!this.backend.releaseAll || this.heldBack) return release();
    const heldBack: HeldBackRelease[] = (this.heldBack = []);
    try {
      return release();
    } finally {
      this.heldBack = undefined;
      this.sendTogether(heldBack);
    }
  }

  /** Releases `lock`, resolving what `settle` makes of whether it was still ours. */
  release<R>(lock: HeldLock, settle: (deleted: boolean) => R): Promise<R> {
    const { fairBackend, notifier } = this;
    const traits = traitsOf(lock.redisKeys.kind);
    if (fairBackend && traits.queuesWhenFair) {
      // The release script hands the lock (or the permit) to the next in line itself: no local
      // hand-off.
      const { redisKeys, token, grantedPlain } = lock;
      return this.send(lock, () => fairBackend.fairRelease(redisKeys, token, grantedPlain), settle);
    }
    const free = () => this.backend.release(lock.redisKeys, lock.token);
    // A reader's share: the release wakes the writers by its message when the last reader leaves
    // (none is due before: no local hand-off).
    if (!traits.releaseFreesPlace) return this.send(lock, free, settle);
    if (this.heldBack) {
      const { heldBack } = this;
      return new Promise<R>((resolve, reject) => {
        heldBack.push({ lock, settle, resolve, reject });
      });
    }
    // A waiter in this process is woken when Redis answers, unless the release message was first.
    notifier.releaseSent(lock.token);
    const { channel } = lock.redisKeys;
    return this.send(
      lock,
      free,
      (deleted) => {
        notifier.releaseAnswered(channel, lock.token, deleted);
        return settle(deleted);
      },
      () => notifier.releaseAnswered(channel, lock.token, false),
    );
  }

  /**
   * Sends the releases `together` held back: one command for all where the store can send one,
   * else each by itself (retried and answered on its own).
   */
  private sendTogether(heldBack: readonly HeldBackRelease[]): void {
    const { backend, notifier } = this;
    const locks = heldBack.map((one) => one.lock);
    const keys = locks.map((lock) => lock.redisKeys);
    const tokens = locks.map((lock) => lock.token);
    const sendAll = (): Promise<boolean[]> | undefined => backend.releaseAll?.(keys, tokens);
    let first: Promise<boolean[]> | undefined;
    try {
      first = heldBack.length > 1 ? sendAll() : undefined;
    } catch (error) {
      first = Promise.reject(error);
    }
    if (!first) {
      for (const one of heldBack) this.release(one.lock, one.settle).then(one.resolve, one.reject);
      return;
    }
    for (const lock of locks) notifier.releaseSent(lock.token);
    const answered = (answers?: readonly boolean[]): void =>
      locks.forEach((lock, i) =>
        notifier.releaseAnswered(lock.redisKeys.channel, lock.token, answers?.[i] ?? false),
      );
    const target = {
      key: locks.map((lock) => lock.key).join(', '),
      // Sent again while any key's lease still runs: a key that lapsed answers "not ours" alone.
      validUntil: Math.max(...locks.map((lock) => lock.validUntil)),
    };
    const again = (): Promise<boolean[]> =>
      sendAll() ?? Promise.reject(new Error('releaseAll declined a set it took before'));
    this.send(
      target,
      () => {
        const sent = first ?? again();
        first = undefined;
        return sent;
      },
      (answers) => {
        answered(answers);
        heldBack.forEach((one, i) => {
          try {
            one.resolve(one.settle(answers[i] ?? false));
          } catch (error) {
            one.reject(error);
          }
        });
      },
      () => answered(),
    ).catch((error: unknown) => {
      for (const one of heldBack) one.reject(error);
    });
  }

  /**
   * Sends `free()`, bounded, again with backoff while Redis refuses it unrun — a Cluster slot in
   * migration answers TRYAGAIN to a script whose keys are split between the two nodes until the
   * move completes — and until the lock's deadline would pass (its key has expired by then). A
   * failure after which the command may have run (a timeout, a lost connection), or any other, is
   * thrown at once: sending it again could run it twice. `settle` maps the answer in the step it
   * comes in (one layer on a path every release takes); `failed` hears of a failure first.
   */
  private send<A, R>(
    target: { readonly key: string; readonly validUntil: number },
    free: () => Promise<A>,
    settle: (answer: A) => R,
    failed?: () => void,
  ): Promise<R> {
    const subject = (): string => `lock "${target.key}"`;
    const from = (failures: number): Promise<R> =>
      // settled(): a store that throws instead of rejecting (closed) still settles the release.
      this.bounded(settled(free), 'release', subject, settle, (error: unknown) => {
        const pause = retryPause(failures);
        if (!refusedUnrun(error) || monotonicNow() + pause >= target.validUntil) {
          failed?.();
          throw error;
        }
        return new Promise((resolve) => setTimeout(resolve, pause)).then(() => from(failures + 1));
      });
    return from(0);
  }
}
