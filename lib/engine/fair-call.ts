import type { Waiter } from './waiter';

/**
 * The state of one fair-mode acquire call: its place in the queue, and what it knows about when
 * a hand-off to it can have happened.
 */
export class FairCall {
  /**
   * When the last try that came back busy while queued was sent. A hand-off to us came after
   * that try ran, so its lease (`min(ttl, entry lifetime)`) ends no earlier than this plus it.
   */
  queuedSince: number;
  /** The fence counter that try saw: a hand-off with a fence at or below it is an old one. */
  seenFence = 0;
  /** The last try sent: leaving the queue goes out after it has run. */
  inFlight?: Promise<unknown>;
  /** Set as the call leaves the queue: a try still in flight sends nothing more. */
  left = false;

  constructor(
    /** One token for the whole call: its place in the queue. */
    readonly token: string,
    startedAt: number,
  ) {
    this.queuedSince = startedAt;
  }

  /** A try came back busy: we are queued (when `queued`), and the counter stood at `fence`. */
  busy(sentAt: number, fence: number, queued: boolean): void {
    if (!queued) return;
    this.queuedSince = sentAt;
    this.seenFence = fence;
  }

  /**
   * The fence of a hand-off the waiter was told of since — if it is newer than what our last
   * busy try saw. An older one (its message read late, after a pause outlasted its lease and
   * another holder took over) is dropped: the lock is no longer ours.
   */
  takeGrant(waiter: Waiter): number | undefined {
    const fence = waiter.takeGrant();
    return fence !== undefined && fence > this.seenFence ? fence : undefined;
  }
}
