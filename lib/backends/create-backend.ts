import { Cluster } from 'ioredis';
import type { ResolvedRedisLockOptions } from '../module/redis-lock-options';
import { openRedisConnection } from '../redis/redis-client';
import type { LockBackend } from './lock-backend';
import { RedisBackend } from './redis.backend';
import { RedlockBackend } from './redlock.backend';

/** Picks the backend the options describe: Redlock nodes, a Cluster, or one Redis. */
export function createBackend(options: ResolvedRedisLockOptions): LockBackend {
  if (options.redlock) {
    const { nodes, nodeTimeout = 200, driftFactor = 0.01 } = options.redlock;
    return new RedlockBackend(
      nodes.map(
        (node) =>
          new RedisBackend(
            openRedisConnection(node),
            options.commandTimeout,
            options.fenceRetention,
          ),
      ),
      nodeTimeout,
      driftFactor,
    );
  }
  if (options.cluster) {
    const client = new Cluster(options.cluster.nodes, options.cluster.options);
    return new RedisBackend(
      { client, owned: true },
      options.commandTimeout,
      options.fenceRetention,
    );
  }
  return new RedisBackend(
    openRedisConnection(options.redis),
    options.commandTimeout,
    options.fenceRetention,
    options.replicaAck,
  );
}
