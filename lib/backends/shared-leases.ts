import type { LockRedisKeys } from '../keys/lock-keys';
import { readAcquireScript } from '../lua/read-acquire.script';
import { readExtendScript } from '../lua/read-extend.script';
import { readReleaseScript } from '../lua/read-release.script';
import type { PublishCommand } from '../lua/release.script';
import { writerLeaveScript } from '../lua/writer-leave.script';
import type { RedisCommander } from '../redis/redis-client';
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
   * batch command), each share by its own compare-and-pexpire, sent together; the answers come
   * in the leases' order.
   */
  async renewMixed(
    leases: readonly RenewableLease[],
    exclusive: (leases: readonly RenewableLease[]) => Promise<(boolean | undefined)[]>,
  ): Promise<(boolean | undefined)[]> {
    const writers = leases.filter((l) => !isShared(l.redisKeys));
    const [batch, shares] = await Promise.all([
      writers.length > 0 ? exclusive(writers) : Promise.resolve([]),
      Promise.all(
        leases
          .filter((l) => isShared(l.redisKeys))
          .map((l) => this.extend(l.redisKeys, l.token, Math.ceil(l.lease))),
      ),
    ]);
    let w = 0;
    let s = 0;
    return leases.map((l) => (isShared(l.redisKeys) ? shares[s++] : batch[w++]));
  }
}
