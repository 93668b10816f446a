/**
 * One waiter for one lock key. A release message wakes it; `pendingWake` remembers a message that
 * arrived while it was busy trying, so the wake-up is not lost between "try failed" and "sleep".
 */
export class Waiter {
  private wake?: () => void;
  private pendingWake = false;
  /** Fair mode: the fence of the lock a release handed to this waiter's token. */
  private grantedFence?: number;

  constructor(
    readonly channel: string,
    /** Fair mode: the waiter's token, its place in the queue (hand-offs are addressed to it). */
    readonly token?: string,
    /**
     * A reader of a read-write lock: while one waits on its channel, a release wakes every
     * waiter there, not one (the readers all get in together, or a writer first).
     */
    readonly shared = false,
  ) {}

  /** Called by the notifier when a release message for this channel arrives. */
  notify(): void {
    if (this.wake) this.wake();
    else this.pendingWake = true;
  }

  /** Fair mode: a release handed the lock to this waiter. */
  grant(fence: number): void {
    this.grantedFence = fence;
    this.notify();
  }

  /** Fair mode: the fence of a hand-off received since the last call, if any (and forgets it). */
  takeGrant(): number | undefined {
    const fence = this.grantedFence;
    this.grantedFence = undefined;
    return fence;
  }

  /** Takes back a wake-up that arrived while this waiter was trying (true if there was one). */
  takePendingWake(): boolean {
    const pending = this.pendingWake;
    this.pendingWake = false;
    return pending;
  }

  get isSleeping(): boolean {
    return this.wake !== undefined;
  }

  /** Sleeps until notified, `ms` passes or `signal` aborts (then rejects with its reason). */
  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.pendingWake) {
      this.pendingWake = false;
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const done = (): void => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        this.wake = undefined;
      };
      const onAbort = (): void => {
        done();
        reject(signal?.reason);
      };
      const timer = setTimeout(() => {
        done();
        resolve();
      }, ms);
      this.wake = () => {
        done();
        resolve();
      };
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }
}
