import type { AcquireTry, RenewableLease } from '../../backends/lock-backend';
import type { LockRedisKeys } from '../../keys/lock-keys';
import { finalReplyErrorCode } from '../../redis/reply-error';
import type { RedisCommander } from '../../redis/redis-client';
import type { KindLeases, RedisKindContext } from '../kind-leases';
import { acquireScript } from './acquire.script';
import { extendScript } from './extend.script';
import { RedisFairQueue } from './redis-fair';
import { releaseAllScript } from './release-all.script';
import { releaseScript } from './release.script';
import { renewInBatches } from './renew-batches';

/**
 * Exclusive leases on one Redis or a Cluster: a mutex, and a read-write lock's writer (refused
 * while readers hold the key — as a sorted set under the same name; with writer priority, it
 * holds new readers back while it waits).
 */
export class RedisExclusiveLeases implements KindLeases {
  readonly fair: RedisFairQueue;

  constructor(private readonly context: RedisKindContext) {
    this.fair = new RedisFairQueue(context);
  }

  /** Fence (> 0) when granted, -(holder's PTTL) when busy; `how` names a waiting writer. */
  acquire(
    keys: LockRedisKeys,
    token: string,
    ttl: number,
    how?: AcquireTry,
    via: RedisCommander = this.context.client,
  ): Promise<number> {
    const writer = how?.waitingWriter;
    const lifetime = Math.ceil(ttl + this.context.fenceRetention);
    const mapped = (reply: number | [waitingRetry: number]): number => {
      if (typeof reply === 'number') return reply;
      writer?.entered();
      return reply[0];
    };
    const { lock, fence } = keys;
    if (!writer) {
      // The uncontended try: no waiting writer, so neither its key nor its two args are sent.
      return acquireScript.run(via, [lock, fence], [token, ttl, lifetime], mapped);
    }
    return acquireScript.run(
      via,
      [lock, fence, keys.writersWaiting],
      [token, ttl, lifetime, writer.id, writer.entryMs],
      mapped,
    );
  }

  async extend(keys: LockRedisKeys, token: string, ms: number): Promise<boolean> {
    const reply = await extendScript.run(
      this.context.client,
      [keys.lock, keys.fence, keys.holder],
      [token, ms, this.context.fenceRetention],
    );
    return reply === 1;
  }

  release<T>(keys: LockRedisKeys, token: string, then: (deleted: boolean) => T): Promise<T> {
    const { client, publish } = this.context;
    return releaseScript.run(client, [keys.lock], [token, publish()], (reply) => then(reply === 1));
  }

  releaseAll<T>(
    keys: readonly LockRedisKeys[],
    tokens: readonly string[],
    then: (deleted: boolean[]) => T,
  ): Promise<T> {
    const { client, publish } = this.context;
    const names = keys.map((k) => k.lock);
    return releaseAllScript.run(client, names, [publish(), ...tokens], (replies) =>
      then(replies.map((reply) => reply === 1)),
    );
  }

  renew(leases: readonly RenewableLease[]): Promise<(boolean | undefined)[]> {
    const { client, cluster, fenceRetention } = this.context;
    if (!cluster) return renewInBatches(client, fenceRetention, leases);
    // A Cluster refuses multi-key scripts across slots: one command per lock, written together
    // (the watchdog sends each node's locks as a batch of their own, see shardOf). Each answers
    // for its own lock: a foreign value under one key (WRONGTYPE) loses that lock only.
    return Promise.all(
      leases.map((l) =>
        this.extend(l.redisKeys, l.token, Math.ceil(l.lease)).catch((error: unknown) =>
          finalReplyErrorCode(error) === 'WRONGTYPE' ? false : undefined,
        ),
      ),
    );
  }
}
