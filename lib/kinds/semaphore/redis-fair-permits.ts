import { limitConflict } from './limit-conflict';
import { messages } from '../../errors/messages';
import { RedisUnavailableError } from '../../errors/errors';
import type { LockRedisKeys } from '../../keys/lock-keys';
import { fairPermitAcquireScript } from './fair-permit-acquire.script';
import { fairPermitReleaseScript } from './fair-permit-release.script';
import type { FairAcquireReply } from '../../backends/lock-backend';
import type { FairLeases, RedisKindContext } from '../kind-leases';
import { permitsOf } from '../../keys/lease-kind';

/**
 * Fair mode for semaphores on one Redis, for `RedisBackend`: waiters for a permit queue in Redis,
 * free places are kept for the first in line, and a release hands its place to the head of the
 * queue directly. The same replies and messages as the fair mutex (`RedisFairQueue`), so one
 * acquirer serves both.
 */
export class RedisFairPermits implements FairLeases {
  constructor(private readonly context: RedisKindContext) {}

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
    const permits = permitsOf(keys.kind)!;
    const { client, fenceRetention, instanceId } = this.context;
    const reply = await fairPermitAcquireScript.run(client, this.fairKeys(keys), [
      token,
      ttl,
      permits,
      queue ? '1' : '0',
      waiterTtl,
      fenceRetention,
      instanceId,
    ]);
    if (!Array.isArray(reply)) return { granted: reply };
    if (reply.length === 2) return { retryAfterMs: Math.max(0, -reply[0]), fence: reply[1] };
    const [held] = reply;
    throw limitConflict(keys.lock, held, permits);
  }

  /** Gives the permit back (or leaves the queue), handing free places on; whether it was ours. */
  async release(keys: LockRedisKeys, token: string): Promise<boolean> {
    const { client, fenceRetention, resets } = this.context;
    const resetsBefore = resets();
    const released =
      (await fairPermitReleaseScript.run(client, this.fairKeys(keys), [
        token,
        this.context.publish(),
        fenceRetention,
        this.context.channel(keys.channel),
      ])) === 1;
    // As in release(): after a reset, "not ours" may be our own first run's answer, lost.
    if (!released && resets() !== resetsBefore) {
      throw new RedisUnavailableError(messages.releaseUnknown(keys.lock));
    }
    return released;
  }

  /** The keys of a fair semaphore, in the order its scripts read them. */
  private fairKeys(keys: LockRedisKeys) {
    const { lock, fence, queue, waiters, waiterIds, permitHolders } = keys;
    return [lock, keys.permitLimit, fence, queue, waiters, waiterIds, permitHolders] as const;
  }
}
