import type { Logger } from '@nestjs/common';
import type { ReleasePubSub } from '../backends/lock-backend';

/**
 * One waiter for one lock key. A release message wakes it; `pendingWake` remembers a message that
 * arrived while it was busy trying, so the wake-up is not lost between "try failed" and "sleep".
 */
export class Waiter {
  private wake?: () => void;
  private pendingWake = false;

  constructor(readonly channel: string) {}

  /** Called by the notifier when a release message for this channel arrives. */
  notify(): void {
    if (this.wake) this.wake();
    else this.pendingWake = true;
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

interface Channel {
  readonly waiters: Set<Waiter>;
  readonly subscribed: Promise<unknown>;
  /** Tokens of releases already handed to a local waiter: their messages wake nobody else. */
  readonly handedOff: Set<string>;
}

/**
 * Wakes waiters when a lock is released, over ONE subscriber connection per process, shared by
 * all keys. A channel is subscribed while it has at least one local waiter. Each release message
 * wakes one local waiter (the longest-waiting idle one), so a hand-off costs one retry per process,
 * not one per waiter; a release in this process wakes its local waiter directly. A lost message
 * only delays a waiter until its fallback timer.
 */
export class ReleaseNotifier {
  private subscriber?: ReleasePubSub;
  private readonly channels = new Map<string, Channel>();

  constructor(
    private readonly createSubscriber: () => ReleasePubSub,
    private readonly logger: Logger,
  ) {}

  /**
   * Registers a waiter; resolves once the server confirmed the subscription, or after
   * `timeoutMs` (Redis out of reach) — the waiter then relies on its fallback timer.
   */
  async register(channel: string, timeoutMs: number, signal?: AbortSignal): Promise<Waiter> {
    const waiter = new Waiter(channel);
    let entry = this.channels.get(channel);
    if (!entry) {
      const subscribed = this.connection()
        .subscribe(channel)
        .catch((error: unknown) => {
          // Not fatal: the waiter still retries on its fallback timer.
          this.logger.warn(`Could not subscribe to ${channel}: ${String(error)}`);
        });
      entry = { waiters: new Set(), subscribed, handedOff: new Set() };
      this.channels.set(channel, entry);
    }
    entry.waiters.add(waiter);
    let timer: NodeJS.Timeout | undefined;
    let onAbort: (() => void) | undefined;
    try {
      await Promise.race([
        entry.subscribed,
        new Promise((resolve) => (timer = setTimeout(resolve, timeoutMs))),
        new Promise((_, reject) => {
          onAbort = () => reject(signal?.reason);
          if (signal?.aborted) onAbort();
          else signal?.addEventListener('abort', onAbort, { once: true });
        }),
      ]);
    } catch (error) {
      // Cancelled while subscribing: leave at once, and let the channel go if we were its last.
      this.unregister(waiter);
      throw error;
    } finally {
      clearTimeout(timer);
      if (onAbort) signal?.removeEventListener('abort', onAbort);
    }
    return waiter;
  }

  unregister(waiter: Waiter): void {
    const entry = this.channels.get(waiter.channel);
    if (!entry || !entry.waiters.delete(waiter) || entry.waiters.size > 0) return;
    this.channels.delete(waiter.channel);
    this.subscriber?.unsubscribe(waiter.channel).catch(() => undefined);
  }

  /** Number of channels subscribed now (for tests and metrics). */
  get channelCount(): number {
    return this.channels.size;
  }

  async close(): Promise<void> {
    const subscriber = this.subscriber;
    this.subscriber = undefined;
    this.channels.clear();
    if (!subscriber) return;
    subscriber.close();
  }

  private connection(): ReleasePubSub {
    if (!this.subscriber) {
      const subscriber = this.createSubscriber();
      subscriber.onMessage((channel, message) => this.onMessage(channel, message));
      subscriber.onError((error) => this.logger.warn(`Release subscriber: ${error.message}`));
      this.subscriber = subscriber;
    }
    return this.subscriber;
  }

  /**
   * A lock of this process was released: hand it to the longest-waiting local waiter now, without
   * waiting for the message to come back from Redis — and before the releasing caller can take it
   * again, which keeps waiters in one process first-come, first-served. The message of this
   * release then wakes nobody else here.
   */
  releasedLocally(channel: string, token: string): void {
    const entry = this.channels.get(channel);
    if (entry && this.wakeOne(entry)) entry.handedOff.add(token);
  }

  private onMessage(channel: string, message: string): void {
    const entry = this.channels.get(channel);
    if (!entry || entry.handedOff.delete(message)) return;
    this.wakeOne(entry);
  }

  /** Wakes the longest-waiting sleeping waiter, else makes the oldest one try again. */
  private wakeOne(entry: Channel): boolean {
    let first: Waiter | undefined;
    for (const waiter of entry.waiters) {
      first ??= waiter;
      if (waiter.isSleeping) {
        waiter.notify();
        return true;
      }
    }
    first?.notify();
    return first !== undefined;
  }
}
