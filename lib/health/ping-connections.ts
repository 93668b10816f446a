import type Redis from 'ioredis';
import type { ConnectionWatch } from '../redis/connection-watch';
import { isClusterClient, type RedisClient } from '../redis/redis-client';
import { monotonicNow } from '../util/clock';
import { withTimeout } from '../util/with-timeout';

/** What a round of PINGs found. */
export interface PingOutcome {
  /** Whether enough servers answered for the locks to be kept (see `needed`). */
  readonly reachable: boolean;
  /** The slowest answer, in ms (undefined when none answered). */
  readonly latencyMs?: number;
  /** Servers pinged, servers that answered, and how many must answer. */
  readonly nodes: number;
  readonly answered: number;
  readonly needed: number;
  /** The first failure's message (with the server's address when there are several). */
  readonly error?: string;
}

/**
 * PINGs the servers the locks live on, through the library's own connections, each bounded by
 * `timeoutMs`. One Redis: that one. A Cluster: every primary, since each holds the locks of its
 * slots and a lock on an unreachable one cannot be renewed. Redlock: every node, of which a
 * quorum must answer, as for a lock call. A backend without connections (in memory) is reachable.
 */
export async function pingConnections(
  connections: ConnectionWatch,
  timeoutMs: number,
): Promise<PingOutcome> {
  const servers = connections.nodes.flatMap(({ client, address }) =>
    serversOf(client).map((server) => ({ server, address: server === client ? address : '' })),
  );
  const cluster = connections.nodes.some(({ client }) => isClusterClient(client));
  const needed = cluster ? servers.length : Math.min(connections.quorum, servers.length);
  const blocked = connections.unavailable();
  if (blocked) {
    // Never connected, or credentials refused: say why at once rather than after a timeout.
    return { reachable: false, nodes: servers.length, answered: 0, needed, error: blocked.message };
  }
  const results = await Promise.allSettled(
    servers.map(({ server }) => timedPing(server, timeoutMs)),
  );
  const latencies: number[] = [];
  let error: string | undefined;
  results.forEach((result, i) => {
    if (result.status === 'fulfilled') latencies.push(result.value);
    else error ??= describeFailure(result.reason, servers.length > 1 ? nameOf(servers[i]) : '');
  });
  return {
    reachable: latencies.length >= needed,
    latencyMs: latencies.length > 0 ? Math.max(...latencies) : undefined,
    nodes: servers.length,
    answered: latencies.length,
    needed,
    error,
  };
}

/** The servers behind one client: itself, or a Cluster's primaries (the client itself before it knows them). */
function serversOf(client: RedisClient): RedisClient[] {
  if (!isClusterClient(client)) return [client];
  const primaries: Redis[] = client.nodes('master');
  return primaries.length > 0 ? primaries : [client];
}

async function timedPing(server: RedisClient, timeoutMs: number): Promise<number> {
  const startedAt = monotonicNow();
  await withTimeout(server.ping(), timeoutMs, 'PING');
  return Math.round((monotonicNow() - startedAt) * 10) / 10;
}

function nameOf(entry: { server: RedisClient; address: string } | undefined): string {
  if (!entry) return '';
  if (entry.address) return entry.address;
  const { host, port } = entry.server.options as { host?: string; port?: number };
  return host && port ? `${host}:${port}` : '';
}

function describeFailure(reason: unknown, where: string): string {
  const message = reason instanceof Error ? reason.message : String(reason);
  return where ? `${where}: ${message}` : message;
}
