import { messages } from '../errors/messages';
import { RedisUnavailableError } from '../errors/redis-unavailable.error';
import type { LockRedisKeys } from '../keys/lock-keys';
import { fairAcquireScript } from '../lua/fair-acquire.script';
import { fairReleaseScript } from '../lua/fair-release.script';
import type { PublishCommand } from '../lua/release.script';
import type { RedisCommander } from '../redis/redis-client';
import type { FairAcquireReply } from './lock-backend';

/**
 * Fair mode on one Redis, for `RedisBackend`: the queue of waiters in Redis, a free lock kept for
 * the head of the queue, and the hand-off to it on release.
 */
export class RedisFairQueue {
  constructor(
    private readonly client: RedisCommander,
    private readonly fenceRetention: number,
    /** Written beside each lease granted, as who holds it (`instanceId`). */
    private readonly instanceId: string,
    /** Connection losses so far: a reply that crossed one may belong to a re-sent command. */
    private readonly resets: () => number,
    /** The command releases publish with now, and the channel name as subscribers know it. */
    private readonly publishing: () => { publish: PublishCommand; channel: (c: string) => string },
  ) {}

  // Plain promise chains, not async functions, and key arrays built in one step: these run on
  // every fair-mode acquire and release.
  acquire(
    keys: LockRedisKeys,
    token: string,
    ttl: number,
    queue: boolean,
    waiterTtl: number,
  ): Promise<FairAcquireReply> {
    return fairAcquireScript
      .run(
        this.client,
        [
          keys.lock,
          keys.fence,
          keys.queue,
          keys.waiters,
          keys.holder,
          keys.waiterIds,
          keys.readers,
        ],
        [token, ttl, queue ? '1' : '0', waiterTtl, this.fenceRetention, this.instanceId],
      )
      .then((reply): FairAcquireReply => {
        if (!Array.isArray(reply)) return { granted: reply };
        const [first, second] = reply;
        return first > 0 ? { ours: first, pttl: second } : { retryAfterMs: -first, fence: second };
      });
  }

  release(keys: LockRedisKeys, token: string): Promise<boolean> {
    const resetsBefore = this.resets();
    const { publish, channel } = this.publishing();
    return fairReleaseScript
      .run(
        this.client,
        [keys.lock, keys.fence, keys.queue, keys.waiters, keys.holder, keys.waiterIds],
        [token, publish, this.fenceRetention, channel(keys.channel)],
      )
      .then((reply) => {
        // As in release(): after a reset, "not ours" may be our own first run's answer, lost.
        if (reply !== 1 && this.resets() !== resetsBefore) {
          throw new RedisUnavailableError(messages.releaseUnknown(keys.lock));
        }
        return reply === 1;
      });
  }
}
