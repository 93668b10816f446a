import type { ReleasePubSub } from '../backends/lock-backend';
import { isClusterClient, type RedisClient } from './redis-client';

/**
 * A dedicated subscriber connection duplicated from `client`. On a Cluster it uses sharded
 * pub/sub (`SSUBSCRIBE`, one subscriber per shard, managed by ioredis' `shardedSubscribers`), so
 * release messages stay on the lock's own shard instead of being broadcast to every node.
 *
 * A client created with ioredis' `keyPrefix` prefixes the keys of the lock scripts, the release
 * channel among them, so releases publish on `<keyPrefix><channel>`. ioredis prefixes the
 * channel of `SSUBSCRIBE` (a key command) but not of `SUBSCRIBE`: add it there, and strip it from
 * incoming messages, so the notifier keeps working with the channel names it knows.
 */
export function createReleasePubSub(client: RedisClient): ReleasePubSub {
  const keyPrefix = String(client.options.keyPrefix ?? '');
  const unprefixed = (channel: string): string =>
    keyPrefix && channel.startsWith(keyPrefix) ? channel.slice(keyPrefix.length) : channel;
  if (isClusterClient(client)) {
    const subscriber = client.duplicate(undefined, { shardedSubscribers: true });
    return {
      subscribe: (channel) => subscriber.ssubscribe(channel),
      unsubscribe: (channel) => subscriber.sunsubscribe(channel),
      onMessage: (listener) =>
        subscriber.on('smessage', (channel: string, message: string) =>
          listener(unprefixed(channel), message),
        ),
      onError: (listener) => subscriber.on('error', listener),
      close: () => subscriber.disconnect(),
    };
  }
  const subscriber = client.duplicate();
  return {
    subscribe: (channel) => subscriber.subscribe(keyPrefix + channel),
    unsubscribe: (channel) => subscriber.unsubscribe(keyPrefix + channel),
    onMessage: (listener) =>
      subscriber.on('message', (channel: string, message: string) =>
        listener(unprefixed(channel), message),
      ),
    onError: (listener) => subscriber.on('error', listener),
    close: () => subscriber.disconnect(),
  };
}

/** Subscribes on every node (Redlock): a release publishes on each, so any one node suffices. */
export function combineReleasePubSubs(parts: ReleasePubSub[]): ReleasePubSub {
  return {
    subscribe: (channel) => Promise.any(parts.map((part) => part.subscribe(channel))),
    unsubscribe: (channel) => Promise.allSettled(parts.map((part) => part.unsubscribe(channel))),
    onMessage: (listener) => parts.forEach((part) => part.onMessage(listener)),
    onError: (listener) => parts.forEach((part) => part.onError(listener)),
    close: () => parts.forEach((part) => part.close()),
  };
}
