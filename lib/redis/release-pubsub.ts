import type { PubSubMode } from './pubsub-mode';
import type { Cluster } from 'ioredis';
import { clusterSlot } from './cluster-slot';
import { isClusterClient, type RedisClient } from './redis-client';

/**
 * Pub/sub for release notifications: plain SUBSCRIBE on a single node or Sentinel, sharded
 * SSUBSCRIBE on a Cluster (the channel hashes to the lock's slot), one per node in Redlock mode.
 */
export interface ReleasePubSub {
  subscribe(channel: string): Promise<unknown>;
  unsubscribe(channel: string): Promise<unknown>;
  /** `message` is the releasing token (or '1' for a forced release). */
  onMessage(listener: (channel: string, message: string) => void): void;
  onError(listener: (error: Error) => void): void;
  /**
   * Calls `listener` when the subscriber connection came back after losing its server (a restart,
   * a Sentinel failover): a release published meanwhile was missed. Absent where it cannot happen
   * (in memory), or where the command connection's watch already covers it (a Cluster).
   */
  onReconnected?(listener: () => void): void;
  close(): void;
}

/**
 * A dedicated subscriber connection duplicated from `client`. On a Cluster with sharded pub/sub
 * (`mode` resolves 'sharded') it uses `SSUBSCRIBE`, one subscriber per shard, managed by ioredis'
 * `shardedSubscribers`, so release messages stay on the lock's own shard; otherwise classic
 * `SUBSCRIBE` (on a Cluster, to any one node: a `PUBLISH` there reaches every node).
 *
 * With ioredis' `keyPrefix`, releases publish on `<keyPrefix><channel>` (the backend adds it).
 * ioredis prefixes the channel of `SSUBSCRIBE` (a key command) but not of `SUBSCRIBE`: add it
 * there, and strip it from incoming messages, so the notifier keeps working with the channel
 * names it knows.
 */
export function createReleasePubSub(
  client: RedisClient,
  mode: () => Promise<PubSubMode>,
): ReleasePubSub {
  const keyPrefix = String(client.options.keyPrefix ?? '');
  if (!isClusterClient(client)) return subscriberOf(client.duplicate(), 'classic', keyPrefix);
  return lazyReleasePubSub(async () => {
    const chosen = await mode();
    return subscriberOf(
      chosen === 'sharded'
        ? client.duplicate(undefined, { shardedSubscribers: true })
        : client.duplicate(),
      chosen,
      keyPrefix,
    );
  });
}

function subscriberOf(subscriber: RedisClient, mode: PubSubMode, keyPrefix: string): ReleasePubSub {
  const unprefixed = (channel: string): string =>
    keyPrefix && channel.startsWith(keyPrefix) ? channel.slice(keyPrefix.length) : channel;
  if (mode === 'sharded') {
    const wanted = new Set<string>();
    followSlotMoves(
      subscriber as Cluster,
      (channel) => wanted.has(unprefixed(channel)),
      unprefixed,
    );
    return {
      subscribe: (channel) => {
        wanted.add(channel);
        return subscriber.ssubscribe(channel);
      },
      unsubscribe: (channel) => {
        wanted.delete(channel);
        return subscriber.sunsubscribe(channel);
      },
      onMessage: (listener) =>
        subscriber.on('smessage', (channel: string, message: string) =>
          listener(unprefixed(channel), message),
        ),
      onError: (listener) => subscriber.on('error', listener),
      close: () => {
        wanted.clear(); // a slot move reported after this is none of ours
        subscriber.disconnect();
      },
    };
  }
  return {
    subscribe: (channel) => subscriber.subscribe(keyPrefix + channel),
    unsubscribe: (channel) => subscriber.unsubscribe(keyPrefix + channel),
    onMessage: (listener) =>
      subscriber.on('message', (channel: string, message: string) =>
        listener(unprefixed(channel), message),
      ),
    onError: (listener) => subscriber.on('error', listener),
    onReconnected: (listener) => {
      // The first 'ready' is the connection's start; each later one, a connection that came back.
      let connected = subscriber.status === 'ready';
      subscriber.on('ready', () => {
        if (connected) listener();
        connected = true;
      });
    },
    close: () => subscriber.disconnect(),
  };
}

/**
 * A node that gives a slot away (resharding, `CLUSTER SETSLOT … NODE`) drops that slot's sharded
 * subscriptions and tells the subscriber with an unasked `sunsubscribe`; ioredis, expecting no
 * reply, reports it as a "Command queue state error" and keeps its old slot map, so the channel
 * would be subscribed nowhere and its waiters would sleep until their fallback timer. On that
 * report, refresh the slot map until it no longer names that node for the slot (the node that is
 * asked may not have heard of the move yet; 2 s at most), then subscribe again, on the new owner.
 */
function followSlotMoves(
  subscriber: Cluster,
  wanted: (channel: string) => boolean,
  unprefixed: (channel: string) => string,
): void {
  subscriber.on('nodeError', (error: unknown, node: unknown) => {
    const pushed = /Last reply: sunsubscribe,(.*),\d+$/s.exec(String((error as Error)?.message));
    const channel = pushed?.[1];
    if (channel === undefined || !wanted(channel)) return;
    const slot = clusterSlot(channel);
    let tries = 0;
    const follow = (): void =>
      subscriber.refreshSlotsCache(() => {
        if (!wanted(channel)) return;
        if (subscriber.slots?.[slot]?.[0] === node && ++tries < 20) {
          setTimeout(follow, 100).unref();
          return;
        }
        // Not awaited: a subscription that meets MOVED is redone by ioredis, never answered here.
        subscriber.ssubscribe(unprefixed(channel)).catch(() => undefined);
      });
    follow();
  });
}

/**
 * A subscriber created once `create` can tell which kind it must be (the Cluster's pub/sub mode,
 * found at startup). Listeners given before then are attached on creation; a failed creation is
 * tried again at the next subscribe.
 */
function lazyReleasePubSub(create: () => Promise<ReleasePubSub>): ReleasePubSub {
  const messageListeners: ((channel: string, message: string) => void)[] = [];
  const errorListeners: ((error: Error) => void)[] = [];
  const reconnectListeners: (() => void)[] = [];
  let creating: Promise<ReleasePubSub> | undefined;
  let inner: ReleasePubSub | undefined;
  let closed = false;
  const ready = (): Promise<ReleasePubSub> => {
    creating ??= create().then(
      (subscriber) => {
        messageListeners.forEach((listener) => subscriber.onMessage(listener));
        errorListeners.forEach((listener) => subscriber.onError(listener));
        reconnectListeners.forEach((listener) => subscriber.onReconnected?.(listener));
        inner = subscriber;
        if (closed) subscriber.close();
        return subscriber;
      },
      (error: unknown) => {
        creating = undefined;
        throw error;
      },
    );
    return creating;
  };
  return {
    // Closed meanwhile: a subscription now would open a connection nobody closes.
    subscribe: (channel) =>
      closed ? Promise.resolve() : ready().then((s) => (closed ? undefined : s.subscribe(channel))),
    unsubscribe: (channel) =>
      creating ? creating.then((subscriber) => subscriber.unsubscribe(channel)) : Promise.resolve(),
    onMessage: (listener) => {
      messageListeners.push(listener);
      inner?.onMessage(listener);
    },
    onError: (listener) => {
      errorListeners.push(listener);
      inner?.onError(listener);
    },
    onReconnected: (listener) => {
      reconnectListeners.push(listener);
      inner?.onReconnected?.(listener);
    },
    close: () => {
      closed = true;
      inner?.close();
    },
  };
}

/** Subscribes on every node (Redlock): a release publishes on each, so any one node suffices. */
export function combineReleasePubSubs(parts: ReleasePubSub[]): ReleasePubSub {
  return {
    subscribe: (channel) => Promise.any(parts.map((part) => part.subscribe(channel))),
    unsubscribe: (channel) => Promise.allSettled(parts.map((part) => part.unsubscribe(channel))),
    onMessage: (listener) => parts.forEach((part) => part.onMessage(listener)),
    onError: (listener) => parts.forEach((part) => part.onError(listener)),
    onReconnected: (listener) => parts.forEach((part) => part.onReconnected?.(listener)),
    close: () => parts.forEach((part) => part.close()),
  };
}
