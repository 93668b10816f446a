import type { Cluster, Redis } from 'ioredis';
import { messages } from '../errors/messages';
import { RedisUnavailableError } from '../errors/errors';
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
import { clockDrift } from '../util/clock';
import { RedisReadLeases } from '../kinds/read/redis-read';
import type { ReplicaAckOptions } from '../options/redis-lock-options';
import { DEFAULT_OPTIONS } from '../options/option-defaults';
import { AcknowledgedGrants } from './acknowledged-grants';
import { acquireAllOnRedis, oneSlot } from './acquire-all';
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
import { findLegacyShareSet, scanLockNames, type LockNamesPage, type PageBound } from './lock-scan';
import { RedisPermits } from '../kinds/semaphore/redis-permits';
import { RedisLeaderLeases } from '../kinds/leader/redis-leader';
import { RedisExclusiveLeases } from '../kinds/exclusive/redis-exclusive';
import { renewByKind, type FairLeases, type KindTable } from '../kinds/kind-leases';

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
  /** Each kind's commands, looked up by a lease's kind (see `lib/kinds/`). */
  private readonly kinds: KindTable;
  private readonly read: RedisReadLeases;
  /** Roles' leadership: exclusive leases under names of their own, and who leads. */
  readonly leaders: RedisLeaderLeases;
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
    const context = {
      client: this.client,
      cluster: this.cluster,
      fenceRetention,
      instanceId,
      publish: () => this.publish,
      channel: (channel: string) => this.keyPrefix + channel,
      resets: () => this.resets,
    };
    this.read = new RedisReadLeases(context);
    const exclusive = new RedisExclusiveLeases(context);
    this.leaders = new RedisLeaderLeases(exclusive, context);
    this.kinds = {
      exclusive,
      read: this.read,
      semaphore: new RedisPermits(context),
      leader: this.leaders,
    };
    this.admin = new RedisAdmin(this.client, publishing);
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
    const kind = this.kinds[keys.kind.type];
    if (!this.acknowledged) return kind.acquire(keys, token, ttl, how);
    return this.acknowledged.run(
      keys.lock,
      (client) => kind.acquire(keys, token, ttl, how, client),
      () => this.release(keys, token),
    );
  }

  acquireAll(
    keys: readonly LockRedisKeys[],
    tokens: readonly string[],
    ttl: number,
  ): Promise<AcquireAllReply> {
    const { client, fenceRetention } = this;
    return acquireAllOnRedis({ client, ttl, fenceRetention }, keys, tokens);
  }

  leaveWriters(keys: LockRedisKeys, id: string): Promise<void> {
    return this.read.leaveWriters(keys, id);
  }

  extend(keys: LockRedisKeys, token: string, ms: number): Promise<boolean> {
    return this.kinds[keys.kind.type].extend(keys, token, ms);
  }

  renewMany(leases: readonly RenewableLease[]): Promise<(boolean | undefined)[]> {
    return renewByKind(this.kinds, leases);
  }

  /** On a Cluster, the node serving the lock's slot; one Redis serves all. */
  shardOf(keys: LockRedisKeys): string {
    return this.cluster ? clusterNodeOf(this.client as Cluster, keys.lock) : '';
  }

  release(keys: LockRedisKeys, token: string): Promise<boolean> {
    const resetsBefore = this.resets;
    return this.kinds[keys.kind.type].release(keys, token, (deleted) => {
      this.assertKnown(resetsBefore, deleted, keys.lock);
      return deleted;
    });
  }

  /**
   * The connection dropped since `resetsBefore` and ioredis re-sent the release: "not there" may
   * be our own first delete whose reply was lost. Say "unknown" rather than wrongly "lost".
   */
  private assertKnown(resetsBefore: number, allDeleted: boolean, locks: string): void {
    if (!allDeleted && this.resets !== resetsBefore) {
      throw new RedisUnavailableError(messages.releaseUnknown(locks));
    }
  }

  releaseAll(
    keys: readonly LockRedisKeys[],
    tokens: readonly string[],
  ): Promise<boolean[]> | undefined {
    const type = keys[0]!.kind.type;
    const kind = this.kinds[type];
    // One script needs one kind, and on a Cluster one slot (a set taken one key at a time may
    // span several).
    if (!kind.releaseAll || keys.some((k) => k.kind.type !== type)) return undefined;
    if (this.cluster && !oneSlot(keys)) return undefined;
    const resetsBefore = this.resets;
    return kind.releaseAll(keys, tokens, (answers): boolean[] => {
      this.assertKnown(resetsBefore, !answers.includes(false), keys.map((k) => k.lock).join(', '));
      return answers;
    });
  }

  fairAcquire(...args: Parameters<FairLeases['acquire']>): Promise<FairAcquireReply> {
    return this.fairOf(args[0]).acquire(...args);
  }

  fairRelease(keys: LockRedisKeys, token: string, plain?: boolean): Promise<boolean> {
    return this.fairOf(keys).release(keys, token, plain);
  }

  /** The fair mode of the kind of `keys`; the engine never queues a kind without one (readers). */
  private fairOf(keys: LockRedisKeys): FairLeases {
    const fair = this.kinds[keys.kind.type].fair;
    if (!fair) throw new Error(`no fair mode for ${keys.kind.type} leases`);
    return fair;
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

  findLegacyKey(prefix: string, bound: PageBound): Promise<string | undefined> {
    return findLegacyShareSet(this.connection.client, prefix, bound);
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
