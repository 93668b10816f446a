import { Logger } from '@nestjs/common';
import { monotonicNow } from '../util/clock';
import { messages } from '../errors/messages';
import type { LockRedisKeys } from '../keys/lock-keys';
import type { RedisClient } from '../redis/redis-client';
import { finalReplyErrorCode } from '../redis/reply-error';
import { raiseFenceScript } from '../lua/raise-fence.script';
import { redlockRenewScript } from '../lua/redlock-renew.script';
import type { LockBackend, RenewableLease } from './lock-backend';
import type { RedisBackend } from './redis.backend';

/** Leases per renewal command, as on one Redis. */
const RENEW_BATCH = 500;

/** One node's answer to a Redlock acquire. */
export interface NodeGrant {
  /** The fence (> 0) when this node granted, else -(holder's PTTL). */
  reply: number;
  /** False when the node restarted within `restartGrace`: its grant is made but does not vote. */
  votes: boolean;
}

/** What a node's renewal found for one lease: 1 renewed, 2 missing and re-created, 0 foreign. */
export type NodeRenewal = 0 | 1 | 2;

/**
 * What the Redlock backend asks of each node of its quorum (an interface, so that specs can give it
 * nodes of their own).
 */
export interface QuorumNode {
  /** The node's single-Redis operations. */
  readonly backend: Pick<
    LockBackend,
    | 'extend'
    | 'release'
    | 'forceRelease'
    | 'isLocked'
    | 'evict'
    | 'inspectRaw'
    | 'scan'
    | 'createPubSub'
    | 'close'
  >;
  acquire(keys: LockRedisKeys, token: string, ttl: number): Promise<NodeGrant>;
  renew(leases: readonly RenewableLease[]): Promise<NodeRenewal[]>;
  raiseFence(keys: LockRedisKeys, token: string, fence: number): Promise<boolean>;
  /** Takes back what the node added to its client. */
  detach(): void;
}

/**
 * One independent primary of a Redlock quorum: the single-Redis operations, plus Redlock's own —
 * renewal with repair, the fence write-back — and whether its grants may vote yet.
 *
 * A node that restarted without persistence has forgotten leases that are still running elsewhere;
 * its "free" is not to be believed until the longest lease has run out (`restartGrace`). Its start
 * time comes from `INFO server` (`uptime_in_seconds`), asked on every (re)connection: a restart
 * always drops the connection, so between a `close` and that answer the node's state is unknown,
 * and a grant it makes meanwhile waits for the answer before it is counted.
 */
export class RedlockNode implements QuorumNode {
  private readonly logger = new Logger('RedisLock');
  /** Monotonic time from which this node's grants vote; pending while unknown. */
  private votesFrom: Promise<number> = Promise.resolve(-Infinity);
  private settle?: (from: number) => void;

  constructor(
    readonly backend: RedisBackend,
    private readonly client: RedisClient,
    private readonly restartGrace: number,
    /** How long (ms) a fence counter outlives its lease (`fenceRetention`). */
    private readonly fenceRetention: number,
  ) {
    if (restartGrace <= 0) return;
    this.unknown();
    client.on('close', this.onClose);
    client.on('ready', this.onReady);
    if (client.status === 'ready') this.probe();
  }

  private readonly onClose = (): void => this.unknown();
  private readonly onReady = (): void => this.probe();

  /** Stops watching restarts: takes back the listeners added to the client (it may be yours). */
  detach(): void {
    this.client.off('close', this.onClose);
    this.client.off('ready', this.onReady);
  }

  async acquire(keys: LockRedisKeys, token: string, ttl: number): Promise<NodeGrant> {
    const reply = await this.backend.acquire(keys, token, ttl);
    if (reply <= 0 || this.restartGrace <= 0) return { reply, votes: true };
    return { reply, votes: monotonicNow() >= (await this.votesFrom) };
  }

  async renew(leases: readonly RenewableLease[]): Promise<NodeRenewal[]> {
    const batches: Promise<NodeRenewal[]>[] = [];
    for (let start = 0; start < leases.length; start += RENEW_BATCH) {
      batches.push(this.renewBatch(leases.slice(start, start + RENEW_BATCH)));
    }
    return (await Promise.all(batches)).flat();
  }

  /** Raises this node's fence counter to `fence`; resolves false when the key is not ours here. */
  async raiseFence(keys: LockRedisKeys, token: string, fence: number): Promise<boolean> {
    const commander = this.client;
    return (
      (await raiseFenceScript.run(commander, [keys.lock, keys.fence], [token, String(fence)])) === 1
    );
  }

  private async renewBatch(leases: readonly RenewableLease[]): Promise<NodeRenewal[]> {
    const keys: string[] = [];
    const args: [fenceRetentionMs: string, ...tokenLeaseMsAndFence: string[]] = [
      String(this.fenceRetention),
    ];
    for (const lease of leases) {
      keys.push(lease.redisKeys.lock, lease.redisKeys.fence, lease.redisKeys.holder);
      args.push(lease.token, String(Math.ceil(lease.lease)), String(lease.fence));
    }
    return redlockRenewScript.run(this.client, keys, args);
  }

  /** From now until the next `INFO` answer, this node's grants wait before they count. */
  private unknown(): void {
    if (this.settle) return;
    this.votesFrom = new Promise((resolve) => (this.settle = resolve));
  }

  private probe(): void {
    this.client.info('server').then(
      (text) => {
        const uptime = Number(/uptime_in_seconds:(\d+)/.exec(text)?.[1]);
        // The difference of two whole-second readings of the clock: 1 can mean 10 ms after the
        // start. So the node started no earlier than `uptime - 1` s ago, as far as we can tell.
        const startedAgo = Math.max(0, uptime - 1) * 1_000;
        this.known(Number.isFinite(uptime) ? monotonicNow() - startedAgo + this.restartGrace : 0);
      },
      (error: unknown) => {
        // Refused for good (no +info in the ACL, a renamed command): restarts cannot be told, so
        // say so and let the node vote. Anything else is a dropped link: the next one asks again.
        if (finalReplyErrorCode(error) === undefined) return;
        this.logger.warn(messages.redlockNoInfo(String(error)));
        this.known(-Infinity);
      },
    );
  }

  private known(from: number): void {
    const settle = this.settle;
    this.settle = undefined;
    if (settle) settle(from);
    else this.votesFrom = Promise.resolve(from);
  }
}
