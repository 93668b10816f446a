import type { Logger } from '@nestjs/common';
import { messages } from '../errors/messages';
import type { ReleasePubSub } from '../redis/release-pubsub';
import { Waiter } from './waiter';

interface Channel {
  readonly waiters: Set<Waiter>;
  readonly subscribed: Promise<unknown>;
}

/** Prefix of a fair-mode hand-off message: `grant:<token>:<fence>`. */
const GRANT = 'grant:';

/**
 * Prefix of a message that wakes every waiter of the lock: the last reader of a read-write lock
 * left, or a waiting writer gave up (`wake-all:<token or id>`).
 */
const WAKE_ALL = 'wake-all:';

/** Own releases remembered at most (oldest forgotten first): bounds the map if messages are lost. */
const MAX_OWN_RELEASES = 10_000;

/**
 * Wakes waiters when a lock is released, over ONE subscriber connection per process, shared by
 * all keys. A channel is subscribed while it has at least one local waiter. Each release message
 * wakes one local waiter (the longest-waiting idle one), so a hand-off costs one retry per process,
 * not one per waiter; a release in this process wakes its local waiter directly. While a reader
 * of a read-write lock waits on a channel, and on a `wake-all:` message, every waiter there wakes
 * instead: readers get in together. A lost message only delays a waiter until its fallback timer.
 */
export class ReleaseNotifier {
  private subscriber?: ReleasePubSub;
  private closed = false;
  private readonly channels = new Map<string, Channel>();
  /**
   * Releases by this process, by token: true once their hand-off woke a local waiter. A release is
   * seen twice here, by its reply and by its message, in either order; the first wakes one local
   * waiter, the second only forgets the token.
   */
  private readonly ownReleases = new Map<string, boolean>();

  constructor(
    private readonly createSubscriber: () => ReleasePubSub,
    private readonly logger: Logger,
  ) {}

  /**
   * Registers a waiter; resolves once the server confirmed the subscription, or after
   * `timeoutMs` (Redis out of reach) — the waiter then relies on its fallback timer.
   */
  async register(
    channel: string,
    timeoutMs: number,
    signal?: AbortSignal,
    token?: string,
    shared = false,
  ): Promise<Waiter> {
    const waiter = new Waiter(channel, token, shared);
    let entry = this.channels.get(channel);
    if (!entry && this.closed) {
      // Shutting down: no new subscriber connection; the waiter relies on its fallback timer.
      entry = { waiters: new Set(), subscribed: Promise.resolve() };
      this.channels.set(channel, entry);
    } else if (!entry) {
      const subscribed = this.connection()
        .subscribe(channel)
        .catch((error: unknown) => {
          // Not fatal: the waiter still retries on its fallback timer.
          this.logger.warn(messages.subscribeFailed(channel, String(error)));
        });
      entry = { waiters: new Set(), subscribed };
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

  /** Wakes every waiter: shutting down, they find out and leave; a connection back, they try again. */
  wakeAll(): void {
    for (const entry of this.channels.values()) {
      for (const waiter of entry.waiters) waiter.notify();
    }
  }

  /** Number of channels subscribed now (for tests and metrics). */
  get channelCount(): number {
    return this.channels.size;
  }

  async close(): Promise<void> {
    this.closed = true;
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
      subscriber.onError((error) => this.logger.warn(messages.subscriberFailed(error.message)));
      // Its connection came back: a release published while it was away was missed, and a
      // failover may have lost the mark that made it publish. Every waiter tries again.
      subscriber.onReconnected?.(() => this.wakeAll());
      this.subscriber = subscriber;
    }
    return this.subscriber;
  }

  /**
   * This process is about to release the lock held by `token`. Remembered only while a local
   * waiter waits on some lock: with none, nothing here can be woken twice. (One that starts
   * waiting before this release is answered may then be woken by both its message and its answer:
   * one more try, never a missed wake-up.)
   */
  releaseSent(token: string): void {
    if (this.channels.size === 0) return;
    if (this.ownReleases.size >= MAX_OWN_RELEASES) {
      this.ownReleases.delete(this.ownReleases.keys().next().value as string);
    }
    this.ownReleases.set(token, false);
  }

  /**
   * The release by `token` answered. If it deleted the lock, hand it to the longest-waiting local
   * waiter now — before the releasing caller can take it again, which keeps waiters in one process
   * first-come, first-served — unless its message already did.
   */
  releaseAnswered(channel: string, token: string, deleted: boolean): void {
    // No waiter in this process (channels.size 0): nothing to hand off, no channel to look up —
    // and, with nothing remembered either, no token to hash.
    if (this.channels.size === 0) {
      if (this.ownReleases.size > 0) this.ownReleases.delete(token);
      return;
    }
    const woken = this.ownReleases.get(token);
    if (!deleted || woken) {
      this.ownReleases.delete(token);
      return;
    }
    const entry = this.channels.get(channel);
    if (entry && this.wakeOne(entry)) this.ownReleases.set(token, true);
    else this.ownReleases.delete(token);
  }

  /** Wakes one more waiter on `channel` (a woken waiter left without trying). */
  passOn(channel: string): void {
    const entry = this.channels.get(channel);
    if (entry) this.wakeOne(entry);
  }

  private onMessage(channel: string, message: string): void {
    if (message.startsWith(GRANT)) {
      // Fair mode: the lock was handed to one waiter's token; only that waiter wakes.
      // The fence follows the last ':' (a token names its holder's instance, which may hold ':').
      const at = message.lastIndexOf(':');
      const token = message.slice(GRANT.length, at);
      const fence = message.slice(at + 1);
      for (const waiter of this.channels.get(channel)?.waiters ?? []) {
        if (waiter.token === token) waiter.grant(Number(fence));
      }
      return;
    }
    if (message.startsWith(WAKE_ALL)) {
      for (const waiter of this.channels.get(channel)?.waiters ?? []) waiter.notify();
      return;
    }
    const own = this.ownReleases.get(message);
    if (own === true) {
      this.ownReleases.delete(message); // the reply already handed it off here
      return;
    }
    if (own === false) this.ownReleases.set(message, true); // first news of our own release
    const entry = this.channels.get(channel);
    if (entry) this.wakeOne(entry);
  }

  /**
   * Wakes the longest-waiting sleeping waiter, else makes the oldest one try again — or, while a
   * reader waits there, every waiter.
   */
  private wakeOne(entry: Channel): boolean {
    for (const reader of entry.waiters) {
      if (!reader.shared) continue;
      for (const waiter of entry.waiters) waiter.notify();
      return true;
    }
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
