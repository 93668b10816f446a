import { limitConflict } from './limit-conflict';
import { messages } from '../errors/messages';
import { RedisUnavailableError } from '../errors/redis-unavailable.error';
import type { LockRedisKeys } from '../keys/lock-keys';
import { fairPermitAcquireScript } from '../lua/fair-permit-acquire.script';
import { fairPermitReleaseScript } from '../lua/fair-permit-release.script';
import type { PublishCommand } from '../lua/release.script';
import type { RedisCommander } from '../redis/redis-client';
import type { FairAcquireReply } from './lock-backend';
import { permitLimitKey, permitsOf } from './redis-permits';

/**
 * Fair mode for semaphores on one Redis, for `RedisBackend`: waiters for a permit queue in Redis,
 * free places are kept for the first in line, and a release hands its place to the head of the
 * queue directly. The same replies and messages as the fair mutex (`RedisFairQueue`), so one
 * acquirer serves both.
 */
export class RedisFairPermits {
  constructor(
    private readonly client: RedisCommander,
    private readonly fenceRetention: number,
    /** Written beside each permit granted, and kept for a hand-off while queued. */
    private readonly instanceId: string,
    /** Connection losses so far: a reply that crossed one may belong to a re-sent command. */
    private readonly resets: () => number,
    /** The command releases publish with now, and the channel name as subscribers know it. */
    private readonly publishing: () => { publish: PublishCommand; channel: (c: string) => string },
  ) {}

  /**
   * One try as the waiter `token`, queueing (or staying queued) when busy and `queue` is set.
   * Never answers `ours`: a permit already ours is granted anew, with a fence of its own.
   */
  async acquire(
    keys: LockRedisKeys,
    token: string,
    ttl: number,
    queue: boolean,
    waiterTtl: number,
  ): Promise<FairAcquireReply> {
    const permits = permitsOf(keys)!;
    const reply = await fairPermitAcquireScript.run(this.client, this.fairKeys(keys), [
      token,
      ttl,
      permits,
      queue ? '1' : '0',
      waiterTtl,
      this.fenceRetention,
      this.instanceId,
    ]);
    if (!Array.isArray(reply)) return { granted: reply };
    if (reply.length === 2) return { retryAfterMs: Math.max(0, -reply[0]), fence: reply[1] };
    const [held] = reply;
    throw limitConflict(keys.lock, held, permits);
  }

  /** Gives the permit back (or leaves the queue), handing free places on; whether it was ours. */
  async release(keys: LockRedisKeys, token: string): Promise<boolean> {
    const resetsBefore = this.resets();
    const { publish, channel } = this.publishing();
    const released =
      (await fairPermitReleaseScript.run(this.client, this.fairKeys(keys), [
        token,
        publish,
        this.fenceRetention,
        channel(keys.channel),
      ])) === 1;
    // As in release(): after a reset, "not ours" may be our own first run's answer, lost.
    if (!released && this.resets() !== resetsBefore) {
      throw new RedisUnavailableError(messages.releaseUnknown(keys.lock));
    }
    return released;
  }

  /** The keys of a fair semaphore, in the order its scripts read them. */
  private fairKeys(keys: LockRedisKeys) {
    const { lock, fence, queue, waiters, waiterIds, permitHolders } = keys;
    return [lock, permitLimitKey(keys), fence, queue, waiters, waiterIds, permitHolders] as const;
  }
}
