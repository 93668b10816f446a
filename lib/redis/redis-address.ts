import type { ClusterNode, RedisOptions } from 'ioredis';
import { isClusterClient, type RedisClient } from './redis-client';

/**
 * Where a client connects, for logs and errors — never its password: `127.0.0.1:6379`,
 * `/run/redis.sock`, `master "mymaster" via Sentinel 10.0.0.1:26379, 10.0.0.2:26379`,
 * `Cluster 10.0.0.1:7000, 10.0.0.2:7000`.
 */
export function describeAddress(client: RedisClient): string {
  if (isClusterClient(client)) {
    const startupNodes = (client as unknown as { startupNodes?: ClusterNode[] }).startupNodes;
    return `Cluster ${(startupNodes ?? []).map(describeNode).join(', ') || '(no startup nodes)'}`;
  }
  const options: RedisOptions = client.options ?? {};
  if (options.sentinels?.length) {
    const sentinels = options.sentinels.map((s) => `${s.host ?? '127.0.0.1'}:${s.port ?? 26379}`);
    return `master "${options.name ?? 'mymaster'}" via Sentinel ${sentinels.join(', ')}`;
  }
  if (options.path) return options.path;
  const db = options.db ? `/${options.db}` : '';
  return `${options.host ?? '127.0.0.1'}:${options.port ?? 6379}${db}`;
}

function describeNode(node: ClusterNode): string {
  if (typeof node === 'number') return `127.0.0.1:${node}`;
  if (typeof node === 'string') {
    // `redis://user:pass@host:port` or `host:port`: keep only host and port.
    try {
      const url = new URL(node.includes('://') ? node : `redis://${node}`);
      return `${url.hostname}:${url.port || 6379}`;
    } catch {
      return '(unparsable node)';
    }
  }
  return `${node.host ?? '127.0.0.1'}:${node.port ?? 6379}`;
}
