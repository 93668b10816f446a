import { limitConflict } from './limit-conflict';
import type { LockRedisKeys } from '../keys/lock-keys';
import { permitAcquireScript } from '../lua/permit-acquire.script';
import { permitExtendScript } from '../lua/permit-extend.script';
import { permitReleaseScript } from '../lua/permit-release.script';
import type { PublishCommand } from '../lua/release.script';
import type { RedisCommander } from '../redis/redis-client';
import { finalReplyErrorCode } from '../redis/reply-error';
import type { RenewableLease } from './lock-backend';

/** Where a semaphore keeps its limit N: beside its permits, in the same hash slot. */
export function permitLimitKey(keys: LockRedisKeys): string {
  return `${keys.lock}:limit`;
}

/** The limit a permit lease asks for, or undefined for any other kind of lease. */
export function permitsOf(keys: LockRedisKeys): number | undefined {
  return keys.kind.type === 'permit' ? keys.kind.permits : undefined;
}

/**
 * The semaphore side of `RedisBackend`: one Lua script per command on the keys of a permit
 * lease (`keys.kind.type === 'permit'`). Each permit is its own member of the sorted set at
 * `keys.lock`, with its own token and lease end, so the watchdog renews it like any lease.
 */
export class RedisPermits {
  constructor(
    private readonly client: RedisCommander,
    private readonly fenceRetention: number,
    /** Written beside each permit granted, as who holds it (`instanceId`). */
    private readonly instanceId: string,
    /** The command releases publish with now, and the channel name as subscribers know it. */
    private readonly publishing: () => { publish: PublishCommand; channel: (c: string) => string },
  ) {}

  /** Fence (> 0) when granted, -(ms until the soonest lease ends) when full; refuses another N. */
  async acquire(client: RedisCommander, keys: LockRedisKeys, token: string, ttl: number) {
    const permits = permitsOf(keys)!;
    const reply = await permitAcquireScript.run(
      client,
      [keys.lock, permitLimitKey(keys), keys.fence, keys.permitHolders],
      [token, ttl, permits, this.fenceRetention, this.instanceId],
    );
    if (typeof reply === 'number') return reply;
    const [held] = reply;
    throw limitConflict(keys.lock, held, permits);
  }

  async extend(keys: LockRedisKeys, token: string, ms: number): Promise<boolean> {
    const reply = await permitExtendScript.run(
      this.client,
      [keys.lock, permitLimitKey(keys), keys.fence, keys.permitHolders],
      [token, ms, this.fenceRetention],
    );
    return reply === 1;
  }

  /** The watchdog's renewal of one permit: a foreign value under its name loses that one only. */
  renew(lease: RenewableLease): Promise<boolean | undefined> {
    return this.extend(lease.redisKeys, lease.token, Math.ceil(lease.lease)).catch(
      (error: unknown) => (finalReplyErrorCode(error) === 'WRONGTYPE' ? false : undefined),
    );
  }

  /** 1 when our live permit was given back, 0 when it had lapsed or was not there. */
  release(keys: LockRedisKeys, token: string): Promise<0 | 1> {
    const { publish, channel } = this.publishing();
    return permitReleaseScript.run(
      this.client,
      [keys.lock, permitLimitKey(keys), keys.permitHolders],
      [token, publish, channel(keys.channel)],
    );
  }
}

/**
 * Renews a watchdog batch whose leases may be of several kinds: the exclusive ones (and readers')
 * through `batch` as before, each permit through `one`. Answers in the leases' order.
 */
export async function renewByKind(
  leases: readonly RenewableLease[],
  batch: (leases: readonly RenewableLease[]) => Promise<(boolean | undefined)[]>,
  one: (lease: RenewableLease) => Promise<boolean | undefined>,
): Promise<(boolean | undefined)[]> {
  if (!leases.some((lease) => lease.redisKeys.kind.type === 'permit')) return batch(leases);
  const others = leases.filter((lease) => lease.redisKeys.kind.type !== 'permit');
  const single = leases.map((lease) =>
    lease.redisKeys.kind.type === 'permit' ? one(lease) : Promise.resolve(0 as const),
  );
  const [batched, answers] = await Promise.all([batch(others), Promise.all(single)]);
  let next = 0;
  return answers.map((answer) => (answer === 0 ? batched[next++] : answer));
}
