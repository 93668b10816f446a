import type { LockRedisKeys } from '../keys/lock-keys';
import { acquireScript } from '../lua/acquire.script';
import { extendScript } from '../lua/extend.script';
import { releaseScript, type PublishCommand } from '../lua/release.script';
import type { RedisCommander } from '../redis/redis-client';
import type { AcquireTry } from './lock-backend';

/**
 * The exclusive side of `RedisBackend`: the plain lock scripts on the keys of an exclusive lease
 * (the default kind), beside `RedisPermits` (semaphores) and `SharedLeases` (readers).
 */
export class ExclusiveLeases {
  constructor(
    private readonly client: RedisCommander,
    private readonly fenceRetention: number,
    /** Written beside each lease granted, as who holds it (`instanceId`). */
    private readonly instanceId: string,
    /** The command releases publish with now, and the channel name as subscribers know it. */
    private readonly publishing: () => { publish: PublishCommand; channel: (c: string) => string },
  ) {}

  /** Fence (> 0) when granted, -(holder's PTTL) when busy; `writer` is a waiting writer's entry. */
  acquire(
    client: RedisCommander,
    keys: LockRedisKeys,
    token: string,
    ttl: number,
    writer: AcquireTry['waitingWriter'],
  ): Promise<number> {
    const lifetime = Math.ceil(ttl + this.fenceRetention);
    const mapped = (reply: number | [waitingRetry: number]): number => {
      if (typeof reply === 'number') return reply;
      writer?.entered();
      return reply[0];
    };
    const { lock, fence, holder, readers } = keys;
    if (!writer) {
      // The uncontended try: no waiting writer, so neither its key nor its two args are sent.
      const args = [token, ttl, lifetime, this.instanceId] as const;
      return acquireScript.run(client, [lock, fence, holder, readers], args, mapped);
    }
    return acquireScript.run(
      client,
      [lock, fence, holder, readers, keys.writersWaiting],
      [token, ttl, lifetime, this.instanceId, writer.id, writer.entryMs],
      mapped,
    );
  }

  async extend(keys: LockRedisKeys, token: string, ms: number): Promise<boolean> {
    const reply = await extendScript.run(
      this.client,
      [keys.lock, keys.fence, keys.holder],
      [token, ms, this.fenceRetention],
    );
    return reply === 1;
  }

  /**
   * Whether `token` held the lock and it is deleted now (its release published), passed through
   * `then` (the caller's check of the answer, in the same step).
   */
  release<T>(keys: LockRedisKeys, token: string, then: (deleted: boolean) => T): Promise<T> {
    const { publish } = this.publishing();
    return releaseScript.run(this.client, [keys.lock, keys.holder], [token, publish], (reply) =>
      then(reply === 1),
    );
  }
}
