import { messages } from '../../errors/messages';
import { RedisUnavailableError } from '../../errors/errors';
import type { LockRedisKeys } from '../../keys/lock-keys';
import { fairAcquireScript } from './fair-acquire.script';
import { fairQuickAcquireScript, fairQuickReleaseScript } from './fair-quick.script';
import { fairReleaseScript } from './fair-release.script';
import type { FairAcquireReply } from '../../backends/lock-backend';
import type { FairLeases, RedisKindContext } from '../kind-leases';

/**
 * Fair mode on one Redis, for `RedisBackend`: the queue of waiters in Redis, a free lock kept for
 * the head of the queue, and the hand-off to it on release.
 */
export class RedisFairQueue implements FairLeases {
  constructor(private readonly context: RedisKindContext) {}

  // Plain promise chains, not async functions, and key arrays built in one step: these run on
  // every fair-mode acquire and release.
  acquire(
    keys: LockRedisKeys,
    token: string,
    ttl: number,
    queue: boolean,
    waiterTtl: number,
    wanted?: () => boolean,
  ): Promise<FairAcquireReply> {
    const full = (): Promise<FairAcquireReply> =>
      this.fullAcquire(keys, token, ttl, queue, waiterTtl);
    // A try that does not queue (a call's first) takes a free lock nobody queues for with default
    // mode's few keys and arguments; anything else goes on to the full script — unless the call
    // gave up meanwhile: it has left the queue, and a try sent after that could grant it a lock
    // nobody would release.
    if (queue) return full();
    const lifetime = Math.ceil(ttl + this.context.fenceRetention);
    return fairQuickAcquireScript
      .run(this.context.client, [keys.lock, keys.fence, keys.queue], [token, ttl, lifetime])
      .then((fence) => {
        if (fence > 0) return { granted: fence, plain: true };
        return wanted?.() === false ? { retryAfterMs: 0, fence: 0 } : full();
      });
  }

  private fullAcquire(
    keys: LockRedisKeys,
    token: string,
    ttl: number,
    queue: boolean,
    waiterTtl: number,
  ): Promise<FairAcquireReply> {
    const { client, fenceRetention, instanceId } = this.context;
    return fairAcquireScript
      .run(
        client,
        [keys.lock, keys.fence, keys.queue, keys.waiters, keys.holder, keys.waiterIds],
        [token, ttl, queue ? '1' : '0', waiterTtl, fenceRetention, instanceId],
      )
      .then((reply): FairAcquireReply => {
        if (!Array.isArray(reply)) return { granted: reply };
        const [first, second] = reply;
        return first > 0 ? { ours: first, pttl: second } : { retryAfterMs: -first, fence: second };
      });
  }

  release(keys: LockRedisKeys, token: string, plain?: boolean): Promise<boolean> {
    const { client, fenceRetention, resets } = this.context;
    const resetsBefore = resets();
    const full = (): Promise<boolean> =>
      fairReleaseScript
        .run(
          client,
          [keys.lock, keys.fence, keys.queue, keys.waiters, keys.holder, keys.waiterIds],
          [token, this.context.publish(), fenceRetention, this.context.channel(keys.channel)],
        )
        .then((reply) => {
          // As in release(): after a reset, "not ours" may be our own first run's answer, lost.
          if (reply !== 1 && resets() !== resetsBefore) {
            throw new RedisUnavailableError(messages.releaseUnknown(keys.lock));
          }
          return reply === 1;
        });
    // A plain grant still unmarked is deleted with default mode's one key; marked (someone
    // queued or waited meanwhile), the full script hands it over.
    if (!plain) return full();
    return fairQuickReleaseScript
      .run(client, [keys.lock], [token])
      .then((deleted) => deleted === 1 || full());
  }
}
