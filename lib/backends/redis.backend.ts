import type { Cluster, Redis } from 'ioredis';
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
import { createReleasePubSub, type ReleasePubSub } from '../redis/release-pubsub';
import { finalReplyErrorCode } from '../redis/reply-error';
import { clockDrift } from '../util/clock';
import { isShared, SharedLeases } from './shared-leases';
import type { ReplicaAckOptions } from '../options/redis-lock-options';
import { DEFAULT_OPTIONS } from '../options/option-defaults';
import { AcknowledgedGrants } from './acknowledged-grants';
import { acquireAllOnRedis } from './acquire-all';
import { redisCapabilities, type StoreCapabilities } from './store-capabilities';
import type {
  AcquireAllReply,
  AcquireTry,
  FairAcquireReply,
  FairLockBackend,
  RenewableLease,
} from './lock-backend';
import type { RawLockInfo } from './lock-info';
import type { EvictedLock } from './lock-eviction';
import { RedisAdmin } from './redis-admin';
import { scanLockNames, type LockNamesPage } from './lock-scan';
import { renewInBatches } from './renew-batches';
import { permitsOf, RedisPermits, renewByKind } from './redis-permits';
import { ExclusiveLeases } from './redis-exclusive';
import { RedisFairQueue } from './redis-fair';
import { RedisFairPermits } from './redis-fair-permits';

/** Locks on one Redis: a single primary (optionally Sentinel-managed) or a Cluster. */
export class RedisBackend implements FairLockBackend {
  /** One Redis serves every kind and strategy; a Cluster and `replicaAck` narrow them. */
  readonly capabilities: StoreCapabilities;
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
  /** With `replicaAck`: where grants and their `WAIT` run, apart from renewals and releases. */
  private readonly acknowledged?: AcknowledgedGrants;
  /** ioredis' `keyPrefix`: it prefixes KEYS, not the channel in ARGV, which subscribers expect. */
  private readonly keyPrefix: string;
  /** Semaphores: permit leases (`keys.kind.type === 'permit'`) run their own scripts. */
  private readonly permits: RedisPermits;
  /** Readers' shares of read-write locks. */
  private readonly shared: SharedLeases;
  /** Exclusive leases, the default kind. */
  private readonly exclusive: ExclusiveLeases;
  /** Fair mode's queue and hand-off: of the lock, or of a semaphore's permits. */
  private readonly fair: RedisFairQueue;
  private readonly fairPermits: RedisFairPermits;
  /** The operator's commands: every kind of lock on a key, read or removed at once. */
  private readonly admin: RedisAdmin;

  constructor(
    private readonly connection: RedisConnection,
    /** Bound (ms) on QUIT at close, and on each node's answer to the Cluster's startup check. */
    private readonly closeTimeout: number,
    /** How long (ms) a fence counter outlives its lock's lease (`fenceRetention`). */
    private readonly fenceRetention: number,
    replicaAck?: ReplicaAckOptions,
    /** Written beside each lease this backend grants, as who holds it (`instanceId`). */
    private readonly instanceId: string = DEFAULT_OPTIONS.instanceId,
  ) {
    this.client = connection.client;
    this.cluster = isClusterClient(connection.client);
    this.capabilities = redisCapabilities(this.cluster, !!replicaAck);
    this.keyPrefix = String(connection.client.options.keyPrefix ?? '');
    const publishing = () => ({
      publish: this.publish,
      channel: (channel: string) => this.keyPrefix + channel,
    });
    // What every kind's commands share: the client, the fence retention, who holds a grant.
    const of = [this.client, fenceRetention, instanceId] as const;
    const resets = () => this.resets;
    this.permits = new RedisPermits(...of, publishing);
    this.admin = new RedisAdmin(this.client, publishing);
    this.exclusive = new ExclusiveLeases(...of, publishing);
    this.fair = new RedisFairQueue(...of, resets, publishing);
    this.fairPermits = new RedisFairPermits(...of, resets, publishing);
    const channelOf = (keys: LockRedisKeys) => this.keyPrefix + keys.channel;
    this.shared = new SharedLeases(...of, () => this.publish, channelOf);
    if (this.cluster)
      this.pubSubCheck = new ClusterPubSubCheck(this.client as Cluster, closeTimeout);
    // An 'error' listener keeps ioredis from printing every reconnect attempt as unhandled.
    if (connection.owned) connection.client.on('error', () => undefined);
    connection.client.on('close', this.onClose);
    if (replicaAck && !this.cluster) {
      this.acknowledged = new AcknowledgedGrants(connection.client as Redis, replicaAck);
    }
  }

  private readonly onClose = (): void => void this.resets++;

  acquire(keys: LockRedisKeys, token: string, ttl: number, how?: AcquireTry): Promise<number> {
    const writer = how?.waitingWriter;
    const grant = (client: RedisCommander): Promise<number> =>
      isShared(keys)
        ? this.shared.acquire(client, keys, token, ttl)
        : permitsOf(keys) !== undefined
          ? this.permits.acquire(client, keys, token, ttl)
          : this.exclusive.acquire(client, keys, token, ttl, writer);
    if (!this.acknowledged) return grant(this.client);
    return this.acknowledged.run(keys.lock, grant, () => this.release(keys, token));
  }

  acquireAll(
    keys: readonly LockRedisKeys[],
    tokens: readonly string[],
    ttl: number,
  ): Promise<AcquireAllReply> {
    const { client, fenceRetention, instanceId } = this;
    return acquireAllOnRedis({ client, ttl, fenceRetention, instanceId }, keys, tokens);
  }

  leaveWriters(keys: LockRedisKeys, id: string): Promise<void> {
    return this.shared.leaveWriters(keys, id);
  }

  async extend(keys: LockRedisKeys, token: string, ms: number): Promise<boolean> {
    if (isShared(keys)) return this.shared.extend(keys, token, ms);
    if (permitsOf(keys) !== undefined) return this.permits.extend(keys, token, ms);
    return this.exclusive.extend(keys, token, ms);
  }

  renewMany(leases: readonly RenewableLease[]): Promise<(boolean | undefined)[]> {
    // Permits renew one by one; every other lease keeps the batched path below.
    return renewByKind(
      leases,
      (rest) => this.renewLeases(rest),
      (l) => this.permits.renew(l),
    );
  }

  private async renewLeases(leases: readonly RenewableLease[]): Promise<(boolean | undefined)[]> {
    if (leases.length === 0) return [];
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
    if (leases.some((l) => isShared(l.redisKeys))) {
      return this.shared.renewMixed(leases, (writers) => this.renewLeases(writers));
    }
    return renewInBatches(this.client, this.fenceRetention, leases);
  }

  /** On a Cluster, the node serving the lock's slot; one Redis serves all. */
  shardOf(keys: LockRedisKeys): string {
    return this.cluster ? clusterNodeOf(this.client as Cluster, keys.lock) : '';
  }

  release(keys: LockRedisKeys, token: string): Promise<boolean> {
    const resetsBefore = this.resets;
    const answered = (deleted: boolean): boolean => {
      if (!deleted && this.resets !== resetsBefore) {
        // The connection dropped meanwhile and ioredis re-sent the release: "not there" may be
        // our own first delete whose reply was lost. Say "unknown" rather than wrongly "lost".
        throw new RedisUnavailableError(messages.releaseUnknown(keys.lock));
      }
      return deleted;
    };
    if (isShared(keys)) return this.shared.release(keys, token).then(answered);
    if (permitsOf(keys) !== undefined) {
      return this.permits.release(keys, token).then((reply) => answered(reply === 1));
    }
    return this.exclusive.release(keys, token, answered);
  }

  fairAcquire(...args: Parameters<RedisFairQueue['acquire']>): Promise<FairAcquireReply> {
    return (permitsOf(args[0]) !== undefined ? this.fairPermits : this.fair).acquire(...args);
  }

  fairRelease(keys: LockRedisKeys, token: string): Promise<boolean> {
    return (permitsOf(keys) !== undefined ? this.fairPermits : this.fair).release(keys, token);
  }

  async forceRelease(keys: LockRedisKeys): Promise<boolean> {
    return (await this.evict(keys)) !== null;
  }

  /** Removes every holder of every kind of lock on the key `keys` names (see RedisAdmin). */
  evict(keys: LockRedisKeys): Promise<EvictedLock | null> {
    return this.admin.evict(keys);
  }

  /** Reads every kind of lock on the key `keys` names (see RedisAdmin). */
  inspectRaw(keys: LockRedisKeys): Promise<RawLockInfo> {
    return this.admin.inspect(keys);
  }

  scan(prefix: string, cursor: string | undefined, count: number): Promise<LockNamesPage> {
    return scanLockNames(this.connection.client, prefix, cursor, count);
  }

  /** Held in any way: what `inspectRaw` reads as held, by a lighter script. */
  isLocked(keys: LockRedisKeys): Promise<boolean> {
    return this.admin.isLocked(keys);
  }

  createPubSub(): ReleasePubSub {
    return createReleasePubSub(this.connection.client, () => this.pubSubMode());
  }

  drift(ttl: number): number {
    return clockDrift(ttl);
  }

  async close(): Promise<void> {
    await this.acknowledged?.close(this.closeTimeout);
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
}
