import type { ResolvedRedisLockOptions } from '../options/redis-lock-options';
import { ClientWatch, ConnectionWatch } from '../redis/connection-watch';
import {
  openClusterConnection,
  openRedisConnection,
  type RedisConnection,
} from '../redis/redis-client';
import { REDLOCK_DRIFT_FACTOR } from '../util/clock';
import type { LockBackend } from './lock-backend';
import { RedisBackend } from './redis.backend';
import { RedlockBackend } from './redlock.backend';
import { RedlockNode } from './redlock-node';
import { assertServesOptions, capabilitiesFor } from './store-capabilities';

/** A backend and the watch over the connections it uses. */
export interface CreatedBackend {
  backend: LockBackend;
  connections: ConnectionWatch;
}

/**
 * Picks the backend the options describe: Redlock nodes, a Cluster, or one Redis. Refuses first,
 * before any connection opens, module options that store cannot serve (`fair` on Redlock, say).
 */
export function createBackend(options: ResolvedRedisLockOptions): CreatedBackend {
  assertServesOptions(capabilitiesFor(options), options);
  if (options.redlock) {
    const { nodes, nodeTimeout = 200, driftFactor = REDLOCK_DRIFT_FACTOR } = options.redlock;
    const restartGrace = options.redlock.restartGrace ?? options.ttl;
    const connections = nodes.map((node) => openRedisConnection(node));
    const watches = connections.map((connection) => new ClientWatch(connection.client));
    const redlockNodes = connections.map((connection) => {
      const { commandTimeout, fenceRetention, instanceId } = options;
      const backend = new RedisBackend(
        connection,
        commandTimeout,
        fenceRetention,
        undefined,
        instanceId,
      );
      return new RedlockNode(backend, connection.client, restartGrace, fenceRetention);
    });
    return {
      backend: new RedlockBackend(redlockNodes, nodeTimeout, driftFactor, options.ttl),
      connections: new ConnectionWatch(
        watches,
        Math.floor(nodes.length / 2) + 1,
        `Redlock over ${nodes.length} nodes (${watches.map((watch) => watch.address).join(', ')})`,
      ),
    };
  }
  const connection: RedisConnection = options.cluster
    ? openClusterConnection(options.cluster.nodes, options.cluster.options)
    : openRedisConnection(options.redis);
  const watch = new ClientWatch(connection.client);
  return {
    backend: new RedisBackend(
      connection,
      options.commandTimeout,
      options.fenceRetention,
      options.replicaAck,
      options.instanceId,
    ),
    connections: new ConnectionWatch([watch], 1, watch.address),
  };
}
