import type { Redis } from 'ioredis';
import { messages } from '../errors/messages';
import { RedisUnavailableError } from '../errors/errors';
import type { ReplicaAckOptions } from '../options/redis-lock-options';
import { closeRedisClient } from '../redis/redis-client';

/**
 * Connections for acknowledged grants at most: a grant blocks its connection for up to
 * `replicaAck.timeout`, so a few let concurrent grants wait side by side.
 */
const POOL_SIZE = 4;

interface GrantConnection {
  readonly client: Redis;
  /** Connection losses so far: a reply that crossed one may answer a re-sent command. */
  resets: number;
  /** Grants in flight on it. */
  busy: number;
}

/**
 * Runs grants that must reach replicas, each with its `WAIT`, on connections of their own.
 * `WAIT` blocks its connection and counts the replicas that reached that connection's last write,
 * so the grant and its `WAIT` share a connection, and it is never the one that renews and
 * releases: a stalled replica delays only other acknowledged grants.
 */
export class AcknowledgedGrants {
  private readonly pool: GrantConnection[] = [];
  private closed = false;

  constructor(
    /** The connection these are duplicated from (same server, Sentinel group and options). */
    private readonly source: Redis,
    private readonly options: ReplicaAckOptions,
  ) {}

  /**
   * Runs `grant` (resolving a fence > 0 when granted), then `WAIT`s on the same connection. The
   * grant counts only if enough replicas acknowledged it and no reset came between the two: after
   * a reset ioredis re-sends a pending `WAIT`, and a new primary (after a failover) answers it at
   * once with its own replicas, though it never had the lock. Otherwise the grant is rolled back
   * (best effort: the old primary may be out of reach; its key then ends with its ttl) and the
   * acquire fails with `RedisUnavailableError`.
   */
  async run(
    key: string,
    grant: (client: Redis) => Promise<number>,
    rollback: () => Promise<unknown>,
  ): Promise<number> {
    const connection = this.pick();
    connection.busy++;
    try {
      const resetsBefore = connection.resets;
      const fence = await grant(connection.client);
      if (fence <= 0) return fence;
      const { minReplicas, timeout } = this.options;
      let acknowledged: number;
      try {
        acknowledged = Number(await connection.client.wait(minReplicas, timeout));
      } catch (error) {
        // Never leave an unacknowledged grant behind, owned by nobody, for a whole lease.
        await rollback().catch(() => false);
        throw error;
      }
      if (connection.resets !== resetsBefore) {
        await rollback().catch(() => false);
        throw new RedisUnavailableError(messages.replicasUnconfirmed(key));
      }
      if (acknowledged < minReplicas) {
        await rollback().catch(() => false);
        throw new RedisUnavailableError(
          messages.replicasTooFew(key, acknowledged, minReplicas, timeout),
        );
      }
      return fence;
    } finally {
      connection.busy--;
    }
  }

  /** Closes every connection opened here. */
  async close(timeoutMs: number): Promise<void> {
    this.closed = true;
    await Promise.all(
      this.pool.splice(0).map((connection) => closeRedisClient(connection.client, timeoutMs)),
    );
  }

  /** An idle connection, else a new one while the pool has room, else the least busy. */
  private pick(): GrantConnection {
    // After close(): the source, whose closed state refuses the command with a clear error.
    if (this.closed) return { client: this.source, resets: 0, busy: 0 };
    const idle = this.pool.find((connection) => connection.busy === 0);
    if (idle) return idle;
    if (this.pool.length < POOL_SIZE) {
      const connection: GrantConnection = { client: this.source.duplicate(), resets: 0, busy: 0 };
      // An 'error' listener keeps ioredis from printing every reconnect attempt as unhandled.
      connection.client.on('error', () => undefined);
      connection.client.on('close', () => connection.resets++);
      // Ended for good (a retryStrategy that gave up): later grants get a fresh connection.
      connection.client.on('end', () => {
        const at = this.pool.indexOf(connection);
        if (at >= 0) this.pool.splice(at, 1);
      });
      this.pool.push(connection);
      return connection;
    }
    return this.pool.reduce((least, next) => (next.busy < least.busy ? next : least));
  }
}
