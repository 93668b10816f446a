import { limitConflict } from './limit-conflict';
import type { LockRedisKeys } from '../../keys/lock-keys';
import { permitAcquireScript } from './permit-acquire.script';
import { permitExtendScript } from './permit-extend.script';
import { permitReleaseScript } from './permit-release.script';
import type { RedisCommander } from '../../redis/redis-client';
import type { AcquireTry, RenewableLease } from '../../backends/lock-backend';
import { permitsOf } from '../../keys/lease-kind';
import { renewOneByOne, type KindLeases, type RedisKindContext } from '../kind-leases';
import { RedisFairPermits } from './redis-fair-permits';

/**
 * Semaphore permits on one Redis or a Cluster: one Lua script per command on the keys of a permit
 * lease (`keys.kind.type === 'semaphore'`). Each permit is its own member of the sorted set at
 * `keys.lock`, with its own token and lease end, so the watchdog renews it like any lease.
 */
export class RedisPermits implements KindLeases {
  readonly fair: RedisFairPermits;

  constructor(private readonly context: RedisKindContext) {
    this.fair = new RedisFairPermits(context);
  }

  /** Fence (> 0) when granted, -(ms until the soonest lease ends) when full; refuses another N. */
  async acquire(
    keys: LockRedisKeys,
    token: string,
    ttl: number,
    _how?: AcquireTry,
    via: RedisCommander = this.context.client,
  ): Promise<number> {
    const permits = permitsOf(keys.kind)!;
    const { fenceRetention, instanceId } = this.context;
    const reply = await permitAcquireScript.run(
      via,
      [keys.lock, keys.permitLimit, keys.fence, keys.permitHolders],
      [token, ttl, permits, fenceRetention, instanceId],
    );
    if (typeof reply === 'number') return reply;
    const [held] = reply;
    throw limitConflict(keys.lock, held, permits);
  }

  async extend(keys: LockRedisKeys, token: string, ms: number): Promise<boolean> {
    const reply = await permitExtendScript.run(
      this.context.client,
      [keys.lock, keys.permitLimit, keys.fence, keys.permitHolders],
      [token, ms, this.context.fenceRetention],
    );
    return reply === 1;
  }

  /** Each permit by its own script: a foreign value under one name loses that permit only. */
  renew(leases: readonly RenewableLease[]): Promise<(boolean | undefined)[]> {
    return renewOneByOne(this, leases);
  }

  /** Our live permit given back (true), or it had lapsed or was not there. */
  release<T>(keys: LockRedisKeys, token: string, then: (deleted: boolean) => T): Promise<T> {
    const { client, publish, channel } = this.context;
    return permitReleaseScript.run(
      client,
      [keys.lock, keys.permitLimit, keys.permitHolders],
      [token, publish(), channel(keys.channel)],
      (reply) => then(reply === 1),
    );
  }
}
