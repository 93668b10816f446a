import type { Cluster, ClusterNode, ClusterOptions, Redis, RedisOptions } from 'ioredis';
import { messages } from '../errors/messages';
import { RedisLockConfigError } from '../errors/errors';
import { ioredisPackage, nodeRedisPackage } from './client-packages';
import {
  isNodeRedisClient,
  wrapNodeRedis,
  type NodeRedisCompatibleClient,
  type NodeRedisCompatibleCluster,
} from './node-redis-client';

export type { NodeRedisCompatibleClient, NodeRedisCompatibleCluster } from './node-redis-client';

/**
 * A connected ioredis client: a single node (or Sentinel-managed) `Redis`, or a `Cluster`. A
 * node-redis client is used through a wrapper with this interface (see `wrapNodeRedis`).
 */
export type RedisClient = Redis | Cluster;

/**
 * What the lock engine needs from a client, typed by capability (as redis-semaphore does) so a
 * plain `Redis`, a `Cluster` or a test double fit.
 */
export interface RedisCommander {
  evalsha(sha: string, numberOfKeys: number, ...args: (string | number)[]): Promise<unknown>;
  eval(script: string, numberOfKeys: number, ...args: (string | number)[]): Promise<unknown>;
}

/**
 * How to reach Redis: a URL, ioredis options, or a client you own (we never close yours): ioredis,
 * iovalkey, or node-redis v5 (`createClient()`, `createCluster()`, connected).
 */
export type RedisConnectionOption =
  | string
  | RedisOptions
  | RedisClient
  | IoredisCompatibleClient
  | NodeRedisCompatibleClient
  | NodeRedisCompatibleCluster;

/**
 * A client with ioredis' interface from another package — `iovalkey` (the Valkey project's fork of
 * ioredis), or another copy of ioredis — recognised by its shape, as `isRedisClient` does, and
 * used as an ioredis client.
 */
export interface IoredisCompatibleClient {
  readonly isCluster: boolean;
  readonly status: string;
  duplicate(...args: never[]): unknown;
  evalsha(...args: never[]): unknown;
}

/** The client the lock uses, and whether this library created it (and so must close it). */
export interface RedisConnection {
  readonly client: RedisClient;
  readonly owned: boolean;
}

/**
 * Recognises a client also when it comes from another copy of ioredis (a v5 app with our v6, two
 * installs): `instanceof` alone would mistake it for an options object and silently open a default
 * connection — possibly to another database, without the password or TLS.
 */
export function isRedisClient(value: unknown): value is RedisClient {
  const ioredis = ioredisPackage();
  if (ioredis && (value instanceof ioredis.Redis || value instanceof ioredis.Cluster)) return true;
  if (typeof value !== 'object' || value === null) return false;
  const candidate = value as Record<string, unknown>;
  return (
    typeof candidate.isCluster === 'boolean' &&
    typeof candidate.duplicate === 'function' &&
    typeof candidate.evalsha === 'function' &&
    typeof candidate.status === 'string'
  );
}

/** A Cluster client, from this or another copy of ioredis. */
export function isClusterClient(client: RedisClient): client is Cluster {
  return (client as { isCluster?: unknown }).isCluster === true;
}

/** Checks a Redis URL early, so a typo fails at startup rather than as a hang at the first lock. */
export function assertRedisUrl(url: string): void {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new RedisLockConfigError(messages.badRedisUrl(url));
  }
  if (!['redis:', 'rediss:'].includes(parsed.protocol) || !parsed.hostname) {
    throw new RedisLockConfigError(messages.badRedisUrl(url));
  }
}

/**
 * For connections we open: closing a socket that never connected (Redis down) otherwise keeps the
 * process alive for ioredis' default 2 s `disconnectTimeout`.
 */
const OWNED_CLIENT_DEFAULTS: RedisOptions = { disconnectTimeout: 200 };

export function openRedisConnection(option: RedisConnectionOption): RedisConnection {
  if (isRedisClient(option)) return { client: option, owned: false };
  if (isNodeRedisClient(option)) return { client: wrapNodeRedis(option), owned: false };
  if (typeof option === 'string') {
    assertRedisUrl(option);
    return { client: openClient(option), owned: true };
  }
  if (Object.getPrototypeOf(option) !== Object.prototype) {
    // A class instance that is not a client (a wrapper, say): refuse rather than read it as
    // options and lock on some default server.
    throw new RedisLockConfigError(
      messages.badOption(
        'redis',
        option,
        'a URL, plain ioredis options, or an ioredis, iovalkey or node-redis client',
      ),
    );
  }
  return { client: openClient(option as RedisOptions), owned: true };
}

/**
 * The options node-redis takes as well, when only node-redis is installed: the address and the
 * credentials. Anything else (Sentinel, TLS options, retry strategies) needs ioredis.
 */
const PLAIN_OPTIONS = new Set(['host', 'port', 'path', 'username', 'password', 'db']);

/** A client we open: ioredis when installed, else node-redis, else a startup error. */
function openClient(option: string | RedisOptions): RedisClient {
  const ioredis = ioredisPackage();
  if (ioredis) {
    return typeof option === 'string'
      ? new ioredis.Redis(option, OWNED_CLIENT_DEFAULTS)
      : new ioredis.Redis({ ...OWNED_CLIENT_DEFAULTS, ...option });
  }
  const nodeRedis = nodeRedisPackage();
  if (!nodeRedis) throw new RedisLockConfigError(messages.noRedisClientPackage());
  if (typeof option === 'string')
    return wrapNodeRedis(nodeRedis.createClient({ url: option }), true);
  const other = Object.keys(option).filter((name) => !PLAIN_OPTIONS.has(name));
  if (other.length > 0) {
    throw new RedisLockConfigError(messages.needsIoredis(`\`redis\` fields ${other.join(', ')}`));
  }
  const { host, port, path, username, password, db } = option;
  const socket = path ? { path } : { host, port };
  return wrapNodeRedis(nodeRedis.createClient({ socket, username, password, database: db }), true);
}

/** The Cluster of the `cluster` option: ioredis' when installed, else node-redis'. */
export function openClusterConnection(
  nodes: readonly ClusterNode[],
  options: ClusterOptions | undefined,
): RedisConnection {
  const ioredis = ioredisPackage();
  if (ioredis) return { client: new ioredis.Cluster([...nodes], options), owned: true };
  const nodeRedis = nodeRedisPackage();
  if (!nodeRedis) throw new RedisLockConfigError(messages.noRedisClientPackage());
  if (options && Object.keys(options).length > 0) {
    throw new RedisLockConfigError(messages.needsIoredis('`cluster.options`'));
  }
  const rootNodes = nodes.map((node) =>
    typeof node === 'number'
      ? { socket: { host: '127.0.0.1', port: node } }
      : typeof node === 'string'
        ? { url: node.includes('://') ? node : `redis://${node}` }
        : { socket: { host: node.host ?? '127.0.0.1', port: Number(node.port ?? 6379) } },
  );
  return { client: wrapNodeRedis(nodeRedis.createCluster({ rootNodes }), true), owned: true };
}

/**
 * Closes a client: QUIT when it is connected (flushes pending replies), else disconnect at once.
 * QUIT is bounded by `timeoutMs`: a link that went silent (a partition) never answers it.
 */
export async function closeRedisClient(client: RedisClient, timeoutMs: number): Promise<void> {
  if (client.status === 'end') return;
  if (client.status !== 'ready') {
    client.disconnect();
    return;
  }
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      client.quit(),
      new Promise((_, reject) => (timer = setTimeout(reject, timeoutMs))),
    ]);
  } catch {
    client.disconnect();
  } finally {
    clearTimeout(timer);
  }
}
