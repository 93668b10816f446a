import type { Cluster } from 'ioredis';
import { messages } from '../errors/messages';
import { RedisUnavailableError } from '../errors/redis-unavailable.error';
import type { LockRedisKeys } from '../keys/lock-keys';
import {
  closeRedisClient,
  isClusterClient,
  type RedisClient,
  type RedisCommander,
  type RedisConnection,
} from '../redis/redis-client';
import type { PubSubMode } from '../redis/pubsub-mode';
import { ClusterPubSubCheck } from '../redis/cluster-pubsub-check';
import { clusterNodeOf } from '../redis/cluster-slot';
import { createReleasePubSub } from '../redis/release-pubsub';
import { finalReplyErrorCode } from '../redis/reply-error';
import { clockDrift } from '../engine/clock';
import { acquireScript } from '../scripts/acquire.script';
import { extendScript } from '../scripts/extend.script';
import { fairAcquireScript } from '../scripts/fair-acquire.script';
import { fairReleaseScript } from '../scripts/fair-release.script';
import { forceReleaseScript } from '../scripts/force-release.script';
import { releaseScript } from '../scripts/release.script';
import { renewManyScript } from '../scripts/renew-many.script';
import type { FairAcquireReply, LockBackend, ReleasePubSub, RenewableLease } from './lock-backend';

/**
 * Leases per renewal command: big enough that 10,000 held locks cost 20 commands a period, small
 * enough that one command keeps Redis busy well under a millisecond.
 */
const RENEW_BATCH = 500;

/** `WAIT`-based replica acknowledgement of a grant. */
export interface ReplicaAckOptions {
  /** Replicas that must have the lock before the grant counts. */
  minReplicas: number;
  /** How long (ms) `WAIT` may block for them. */
  timeout: number;
}

/** Locks on one Redis: a single primary (optionally Sentinel-managed) or a Cluster. */
export class RedisBackend implements LockBackend {
  private readonly client: RedisClient & RedisCommander;
  /**
   * On a Cluster, which pub/sub mode its nodes have: releases publish with `SPUBLISH` (sharded
   * pub/sub keeps a release message on the lock's own shard) when every node has it, else with
   * `PUBLISH` (see `ClusterPubSubCheck`). One Redis: always `PUBLISH`.
   */
  private readonly pubSubCheck?: ClusterPubSubCheck;
  private readonly cluster: boolean;
  /** Connection losses so far: a reply that crossed one may belong to a re-sent command. */
  private resets = 0;
  /** ioredis' `keyPrefix`: it prefixes KEYS, not the channel in ARGV, which subscribers expect. */
  private readonly keyPrefix: string;

  constructor(
    private readonly connection: RedisConnection,
    /** Bound (ms) on QUIT at close, and on each node's answer to the Cluster's startup check. */
    private readonly closeTimeout: number,
    /** How long (ms) a fence counter outlives its lock's lease (`fenceRetention`). */
    private readonly fenceRetention: number,
    private readonly replicaAck?: ReplicaAckOptions,
  ) {
    this.client = connection.client as RedisClient & RedisCommander;
    this.cluster = isClusterClient(connection.client);
    this.keyPrefix = String(connection.client.options.keyPrefix ?? '');
    if (this.cluster)
      this.pubSubCheck = new ClusterPubSubCheck(this.client as Cluster, closeTimeout);
    // An 'error' listener keeps ioredis from printing every reconnect attempt as unhandled.
    if (connection.owned) connection.client.on('error', () => undefined);
    connection.client.on('close', this.onClose);
  }

  private readonly onClose = (): void => void this.resets++;

  acquire(keys: LockRedisKeys, token: string, ttl: number): Promise<number> {
    const sent = acquireScript.run(
      this.client,
      [keys.lock, keys.fence],
      [token, ttl, this.fenceRetention],
    );
    if (!this.replicaAck) return sent.then(Number);
    return sent.then(async (reply) => {
      const fence = Number(reply);
      if (fence > 0) await this.awaitReplicas(keys, token);
      return fence;
    });
  }

  async extend(keys: LockRedisKeys, token: string, ms: number): Promise<boolean> {
    const keysOf = [keys.lock, keys.fence];
    return (await extendScript.run(this.client, keysOf, [token, ms, this.fenceRetention])) === 1;
  }

  async renewMany(leases: readonly RenewableLease[]): Promise<(boolean | undefined)[]> {
    if (this.cluster) {
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
    const batches: Promise<boolean[]>[] = [];
    for (let start = 0; start < leases.length; start += RENEW_BATCH) {
      batches.push(this.renewBatch(leases.slice(start, start + RENEW_BATCH)));
    }
    return (await Promise.all(batches)).flat();
  }

  /** On a Cluster, the node serving the lock's slot; one Redis serves all. */
  shardOf(keys: LockRedisKeys): string {
    return this.cluster ? clusterNodeOf(this.client as Cluster, keys.lock) : '';
  }

  release(keys: LockRedisKeys, token: string): Promise<boolean> {
    const resetsBefore = this.resets;
    const sent = releaseScript.run(
      this.client,
      [keys.lock],
      [token, this.publish, this.keyPrefix + keys.channel],
    );
    return sent.then((reply) => {
      const deleted = reply === 1;
      if (!deleted && this.resets !== resetsBefore) {
        // The connection dropped meanwhile and ioredis re-sent the release: "not there" may be
        // our own first delete whose reply was lost. Say "unknown" rather than wrongly "lost".
        throw new RedisUnavailableError(messages.releaseUnknown(keys.lock));
      }
      return deleted;
    });
  }

  async fairAcquire(
    keys: LockRedisKeys,
    token: string,
    ttl: number,
    queue: boolean,
    waiterTtl: number,
  ): Promise<FairAcquireReply> {
    const reply = await fairAcquireScript.run(
      this.client,
      [keys.lock, keys.fence, keys.queue, keys.waiters],
      [token, ttl, queue ? '1' : '0', waiterTtl, this.fenceRetention],
    );
    if (!Array.isArray(reply)) return { granted: Number(reply) };
    const [first, second] = reply.map(Number);
    return first > 0 ? { ours: first, pttl: second } : { busy: -first, fence: second };
  }

  async fairRelease(keys: LockRedisKeys, token: string): Promise<boolean> {
    const resetsBefore = this.resets;
    const released =
      (await fairReleaseScript.run(
        this.client,
        [keys.lock, keys.fence, keys.queue, keys.waiters],
        [token, this.publish, this.fenceRetention, this.keyPrefix + keys.channel],
      )) === 1;
    // As in release(): after a reset, "not ours" may be our own first run's answer, lost.
    if (!released && this.resets !== resetsBefore) {
      throw new RedisUnavailableError(messages.releaseUnknown(keys.lock));
    }
    return released;
  }

  async forceRelease(keys: LockRedisKeys): Promise<boolean> {
    return (
      (await forceReleaseScript.run(
        this.client,
        [keys.lock],
        [this.publish, this.keyPrefix + keys.channel],
      )) === 1
    );
  }

  async isLocked(keys: LockRedisKeys): Promise<boolean> {
    return (await this.client.exists(keys.lock)) === 1;
  }

  createPubSub(): ReleasePubSub {
    return createReleasePubSub(this.connection.client, () => this.pubSubMode());
  }

  drift(ttl: number): number {
    return clockDrift(ttl);
  }

  async close(): Promise<void> {
    if (this.connection.owned) await closeRedisClient(this.connection.client, this.closeTimeout);
    // The client may be the app's own, outliving this backend: take back what we added to it.
    this.connection.client.off('close', this.onClose);
    this.pubSubCheck?.close();
  }

  /** The command releases publish with now. */
  private get publish(): 'PUBLISH' | 'SPUBLISH' {
    return this.pubSubCheck?.publish ?? 'PUBLISH';
  }

  /** The pub/sub mode: asked of a Cluster's nodes (again, if none answered yet); else classic. */
  private pubSubMode(): Promise<PubSubMode> {
    return this.pubSubCheck ? this.pubSubCheck.modeNow() : Promise.resolve('classic');
  }

  private async renewBatch(leases: readonly RenewableLease[]): Promise<boolean[]> {
    const keys: string[] = [];
    const args: (string | number)[] = [this.fenceRetention];
    for (const lease of leases) {
      keys.push(lease.redisKeys.lock, lease.redisKeys.fence);
      args.push(lease.token, Math.ceil(lease.lease));
    }
    const replies = (await renewManyScript.run(this.client, keys, args)) as number[];
    return replies.map((reply) => reply === 1);
  }

  /**
   * `WAIT` on the connection that wrote the grant: it returns how many replicas have received
   * that write. A grant too few replicas have seen is rolled back, since a failover now could
   * hand the lock to someone else. WAIT narrows that window; it cannot close it (a replica can
   * still lose the write, and WAIT does not make Redis strongly consistent).
   */
  private async awaitReplicas(keys: LockRedisKeys, token: string): Promise<void> {
    const { minReplicas, timeout } = this.replicaAck!;
    let acknowledged: number;
    try {
      acknowledged = Number(
        await (this.client as import('ioredis').Redis).wait(minReplicas, timeout),
      );
    } catch (error) {
      // Never leave an unacknowledged grant behind, owned by nobody, for a whole lease.
      await this.release(keys, token).catch(() => false);
      throw error;
    }
    if (acknowledged >= minReplicas) return;
    await this.release(keys, token).catch(() => false);
    throw new RedisUnavailableError(
      `Only ${acknowledged} of ${minReplicas} replicas acknowledged the lock "${keys.lock}" within ` +
        `${timeout} ms, so it was released. Check replication, or lower replicaAck.minReplicas.`,
    );
  }
}
