import type { LockRedisKeys } from '../../keys/lock-keys';
import { readAcquireScript } from './read-acquire.script';
import { readExtendScript } from './read-extend.script';
import { readReleaseScript } from './read-release.script';
import { writerLeaveScript } from './writer-leave.script';
import type { RedisCommander } from '../../redis/redis-client';
import type { AcquireTry, RenewableLease } from '../../backends/lock-backend';
import { renewOneByOne, type KindLeases, type RedisKindContext } from '../kind-leases';

/**
 * Readers' shares of read-write locks on one Redis or a Cluster: many at once, never beside a
 * writer (whose exclusive lease is `RedisExclusiveLeases`), each renewed on its own. The shares
 * are a sorted set under the lock's own key, where a writer's lease is a string.
 */
export class RedisReadLeases implements KindLeases {
  constructor(private readonly context: RedisKindContext) {}

  acquire(
    keys: LockRedisKeys,
    token: string,
    ttl: number,
    _how?: AcquireTry,
    via: RedisCommander = this.context.client,
  ): Promise<number> {
    const { fenceRetention, instanceId } = this.context;
    return readAcquireScript.run(
      via,
      [
        keys.lock,
        keys.writersWaiting,
        keys.queue,
        keys.fence,
        keys.readerHolders,
        keys.permitLimit,
      ],
      [token, ttl, fenceRetention, instanceId],
    );
  }

  async extend(keys: LockRedisKeys, token: string, ms: number): Promise<boolean> {
    const reply = await readExtendScript.run(
      this.context.client,
      [keys.lock, keys.fence, keys.readerHolders],
      [token, ms, this.context.fenceRetention],
    );
    return reply === 1;
  }

  renew(leases: readonly RenewableLease[]): Promise<(boolean | undefined)[]> {
    return renewOneByOne(this, leases);
  }

  release<T>(keys: LockRedisKeys, token: string, then: (deleted: boolean) => T): Promise<T> {
    const { client, publish, channel } = this.context;
    return readReleaseScript.run(
      client,
      [keys.lock, keys.readerHolders],
      [token, publish(), channel(keys.channel)],
      (reply) => then(reply === 1),
    );
  }

  /**
   * A writer waiting with writer priority gave up: its entry leaves the writers' waiting set, and
   * the readers it held back are woken.
   */
  async leaveWriters(keys: LockRedisKeys, id: string): Promise<void> {
    const { client, publish, channel } = this.context;
    await writerLeaveScript.run(
      client,
      [keys.writersWaiting],
      [id, publish(), channel(keys.channel)],
    );
  }
}
