import { Cluster } from 'ioredis';
import type { ResolvedRedisLockOptions } from '../module/redis-lock-options';
import { openRedisConnection } from '../redis/redis-client';
import type { LockBackend } from './lock-backend';
import { RedisBackend } from './redis.backend';
import { RedlockBackend } from './redlock.backend';
import { RedlockNode } from './redlock-node';

/** Picks the backend the options describe: Redlock nodes, a Cluster, or one Redis. */
export function createBackend(options: ResolvedRedisLockOptions): LockBackend {
  if (options.redlock) {
    const { nodes, nodeTimeout = 200, driftFactor = 0.01 } = options.redlock;
    const restartGrace = options.redlock.restartGrace ?? options.ttl;
    const redlockNodes = nodes.map((node) => {
      const connection = openRedisConnection(node);
      const backend = new RedisBackend(connection, options.commandTimeout);
      return new RedlockNode(backend, connection.client, restartGrace);
    });
    return new RedlockBackend(redlockNodes, nodeTimeout, driftFactor, options.ttl);
  }
  if (options.cluster) {
    const client = new Cluster(options.cluster.nodes, options.cluster.options);
    return new RedisBackend({ client, owned: true }, options.commandTimeout);
  }
  return new RedisBackend(
    openRedisConnection(options.redis),
    options.commandTimeout,
    options.replicaAck,
  );
}
