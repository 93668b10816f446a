import type { ReleasePubSub } from '../redis/release-pubsub';

/** One subscriber connection of a {@link MemoryPubSubHub}. */
class MemorySubscriber implements ReleasePubSub {
  readonly channels = new Set<string>();
  private readonly messageListeners: ((channel: string, message: string) => void)[] = [];
  private closed = false;

  constructor(private readonly hub: MemoryPubSubHub) {}

  subscribe(channel: string): Promise<unknown> {
    if (this.closed) return Promise.reject(new Error('The subscriber is closed'));
    this.channels.add(channel);
    return Promise.resolve();
  }

  unsubscribe(channel: string): Promise<unknown> {
    this.channels.delete(channel);
    return Promise.resolve();
  }

  onMessage(listener: (channel: string, message: string) => void): void {
    this.messageListeners.push(listener);
  }

  /** An in-memory connection never fails: error listeners are accepted and never called. */
  onError(): void {}

  close(): void {
    this.closed = true;
    this.channels.clear();
    this.hub.forget(this);
  }

  /** A message already sent reaches it even if it unsubscribed since; a closed one hears nothing. */
  deliver(channel: string, message: string): void {
    if (!this.closed) this.messageListeners.forEach((l) => l(channel, message));
  }
}

/**
 * Redis pub/sub between the in-memory backend and its subscribers: a message reaches the
 * subscribers that were subscribed to its channel when it was published (none are queued for
 * later), on a later microtask — a subscriber never hears it inside the publishing call, as a
 * Redis subscriber never hears it before the publishing script has run.
 */
export class MemoryPubSubHub {
  private readonly subscribers = new Set<MemorySubscriber>();

  /** A new subscriber connection (what `createPubSub()` hands out). */
  connect(): ReleasePubSub {
    const subscriber = new MemorySubscriber(this);
    this.subscribers.add(subscriber);
    return subscriber;
  }

  publish(channel: string, message: string): void {
    const receivers = [...this.subscribers].filter((s) => s.channels.has(channel));
    if (receivers.length === 0) return;
    // A promise job, not queueMicrotask or a timer: Jest's fake timers must not hold it back.
    void Promise.resolve().then(() => receivers.forEach((s) => s.deliver(channel, message)));
  }

  /** How many subscribers listen on `channel` now. */
  subscriberCount(channel: string): number {
    return [...this.subscribers].filter((s) => s.channels.has(channel)).length;
  }

  /** @internal A subscriber closed. */
  forget(subscriber: MemorySubscriber): void {
    this.subscribers.delete(subscriber);
  }
}
