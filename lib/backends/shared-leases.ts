import type { LockRedisKeys } from '../keys/lock-keys';
import { readAcquireScript } from '../lua/read-acquire.script';
import { readExtendScript } from '../lua/read-extend.script';
import { readReleaseScript } from '../lua/read-release.script';
import type { PublishCommand } from '../lua/release.script';
import { writerLeaveScript } from '../lua/writer-leave.script';
import type { RedisCommander } from '../redis/redis-client';
import { finalReplyErrorCode } from '../redis/reply-error';
import type { RenewableLease } from './lock-backend';

/** Whether a lease is a reader's share of a read-write lock. */
export const isShared = (keys: LockRedisKeys): boolean => keys.kind.type === 'shared';

/**
 * The commands of readers' shares on one Redis (or a Cluster), for `RedisBackend`: its exclusive
 * commands stay as they were, and it hands a share's to these.
 */
export class SharedLeases {
  constructor(
    private readonly client: RedisCommander,
    /** How long (ms) a fence counter outlives the lease of a holder. */
    private readonly fenceRetention: number,
    /** Written beside each share granted, as who holds it (`instanceId`). */
    private readonly instanceId: string,
    /** The publish command now, and the channel as subscribers name it (ioredis' keyPrefix). */
    private readonly publish: () => PublishCommand,
    private readonly channelOf: (keys: LockRedisKeys) => string,
  ) {}

  acquire(
    client: RedisCommander,
    keys: LockRedisKeys,
    token: string,
    ttl: number,
  ): Promise<number> {
    return readAcquireScript.run(
      client,
      [keys.lock, keys.readers, keys.writersWaiting, keys.queue, keys.fence, keys.readerHolders],
      [token, ttl, this.fenceRetention, this.instanceId],
    );
  }

  async extend(keys: LockRedisKeys, token: string, ms: number): Promise<boolean> {
    const reply = await readExtendScript.run(
      this.client,
      [keys.readers, keys.fence, keys.readerHolders],
      [token, ms, this.fenceRetention],
    );
    return reply === 1;
  }

  /**
   * The watchdog's renewal of one share: a foreign value under one of its names (WRONGTYPE) loses
   * that share only, as "not ours"; an answer that could not be told is undefined (retried).
   */
  renew(lease: RenewableLease): Promise<boolean | undefined> {
    return this.extend(lease.redisKeys, lease.token, Math.ceil(lease.lease)).catch(
      (error: unknown) => (finalReplyErrorCode(error) === 'WRONGTYPE' ? false : undefined),
    );
  }

  async release(keys: LockRedisKeys, token: string): Promise<boolean> {
    const reply = await readReleaseScript.run(
      this.client,
      [keys.readers, keys.readerHolders],
      [token, this.publish(), this.channelOf(keys)],
    );
    return reply === 1;
  }

  async leaveWriters(keys: LockRedisKeys, id: string): Promise<void> {
    await writerLeaveScript.run(
      this.client,
      [keys.writersWaiting],
      [id, this.publish(), this.channelOf(keys)],
    );
  }

  /**
   * Renews a batch with readers' shares in it: the exclusive leases still go to `exclusive` (one
   * batch command), each share by its own compare-and-pexpire (`renew`), sent together; the
   * answers come in the leases' order, each share's its own, so one share's foreign value never
   * fails the batch.
   */
  async renewMixed(
    leases: readonly RenewableLease[],
    exclusive: (leases: readonly RenewableLease[]) => Promise<(boolean | undefined)[]>,
  ): Promise<(boolean | undefined)[]> {
    const writers = leases.filter((l) => !isShared(l.redisKeys));
    const [batch, shares] = await Promise.all([
      writers.length > 0 ? exclusive(writers) : Promise.resolve([]),
      Promise.all(leases.filter((l) => isShared(l.redisKeys)).map((l) => this.renew(l))),
    ]);
    let w = 0;
    let s = 0;
    return leases.map((l) => (isShared(l.redisKeys) ? shares[s++] : batch[w++]));
  }
}
