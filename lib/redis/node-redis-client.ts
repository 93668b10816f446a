import type { Cluster, Redis } from 'ioredis';
import { messages } from '../errors/messages';
import { RedisLockConfigError } from '../errors/errors';

/**
 * A node-redis v5 client (`createClient()` from the `redis` package), recognised by its shape so
 * that any copy of the package fits. Pass it connected (`await client.connect()`): a closed
 * node-redis client refuses commands rather than queueing them.
 */
export interface NodeRedisCompatibleClient {
  readonly isOpen: boolean;
  readonly isReady: boolean;
  sendCommand(...args: never[]): unknown;
  duplicate(...args: never[]): unknown;
  connect(...args: never[]): unknown;
}

/** A node-redis v5 Cluster client (`createCluster()`), recognised by its shape. */
export interface NodeRedisCompatibleCluster {
  readonly isOpen: boolean;
  readonly masters: readonly unknown[];
  sendCommand(...args: never[]): unknown;
  nodeClient(...args: never[]): unknown;
  duplicate(...args: never[]): unknown;
}

type Listener = (...args: never[]) => void;
type PubSubListener = (message: string, channel: string) => void;

/** What this file uses of a node-redis client, a Cluster and a Cluster node's client. */
interface NodeRedisEmitter {
  readonly isOpen: boolean;
  on(event: string, listener: Listener): unknown;
  off(event: string, listener: Listener): unknown;
  connect(): Promise<unknown>;
  close(): Promise<unknown>;
  destroy(): unknown;
  subscribe(channel: string, listener: PubSubListener): Promise<unknown>;
  unsubscribe(channel: string, listener: PubSubListener): Promise<unknown>;
  sSubscribe(channel: string, listener: PubSubListener): Promise<unknown>;
  sUnsubscribe(channel: string, listener: PubSubListener): Promise<unknown>;
}
interface SingleClient extends NodeRedisEmitter {
  readonly isReady: boolean;
  readonly options?: {
    url?: string;
    database?: number;
    socket?: { host?: string; port?: number; path?: string };
  };
  sendCommand(args: string[]): Promise<unknown>;
  duplicate(): SingleClient;
}
interface ShardNode {
  readonly host: string;
  readonly port: number;
  readonly address: string;
}
interface ClusterClient extends NodeRedisEmitter {
  readonly masters: readonly ShardNode[];
  readonly replicas: readonly ShardNode[];
  readonly slots: readonly ({ master: ShardNode } | undefined)[];
  readonly _options?: {
    rootNodes?: readonly { url?: string; socket?: { host?: string; port?: number } }[];
  };
  sendCommand(firstKey: string | undefined, isReadonly: boolean, args: string[]): Promise<unknown>;
  nodeClient(node: ShardNode): Promise<{ sendCommand(args: string[]): Promise<unknown> }>;
  duplicate(): ClusterClient;
}

/** Whether `value` is a node-redis v5 client of any kind (a plain one, a Cluster, a Sentinel…). */
export function isNodeRedisClient(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const candidate = value as Record<string, unknown>;
  return typeof candidate.sendCommand === 'function' && typeof candidate.isOpen === 'boolean';
}

/**
 * A node-redis client (or Cluster) wrapped into the part of ioredis' interface the lock uses:
 * scripts (`evalsha`/`eval`), the few plain commands (PING, INFO, DEL, SCAN, WAIT, COMMAND INFO),
 * connection events, pub/sub on a duplicated connection, and a Cluster's nodes and slot map. The
 * rest of the library then runs unchanged on it; this file is the only one that knows node-redis.
 * `owned`: this library made the client (a duplicate, or one opened from a URL) and closes it.
 */
export function wrapNodeRedis(value: unknown, owned = false): Redis | Cluster {
  const candidate = value as Record<string, unknown>;
  if (Array.isArray(candidate.masters) && typeof candidate.nodeClient === 'function') {
    return new NodeRedisCluster(value as ClusterClient, owned) as unknown as Cluster;
  }
  if (typeof candidate.duplicate === 'function' && typeof candidate.sSubscribe === 'function') {
    return new NodeRedisSingle(value as SingleClient, owned) as unknown as Redis;
  }
  // createSentinel(): it has no duplicate() for a subscriber or a WAIT connection of our own.
  const kind = typeof candidate.acquire === 'function' ? 'Sentinel client' : 'client of this kind';
  throw new RedisLockConfigError(messages.nodeRedisUnsupported(kind));
}

/** ioredis' event names → node-redis' (a client's, a Cluster's). */
const SINGLE_EVENTS: Record<string, readonly string[]> = {
  ready: ['ready'],
  error: ['error'],
  // ioredis' 'close' is any loss of the connection: node-redis then reconnects, or has ended.
  close: ['reconnecting', 'end'],
  end: ['end'],
};
const CLUSTER_EVENTS: Record<string, readonly string[]> = {
  ready: ['connect'],
  error: ['error'],
  close: ['node-reconnecting', 'disconnect'],
  end: ['disconnect'],
};

/** What both kinds share: events, pub/sub, closing. */
abstract class NodeRedisFacade<Inner extends NodeRedisEmitter> {
  private readonly listeners: Record<'message' | 'smessage', Set<Listener>> = {
    message: new Set(),
    smessage: new Set(),
  };
  private readonly onMessage: PubSubListener = (message, channel) =>
    this.listeners.message.forEach((listener) =>
      (listener as (...args: string[]) => void)(channel, message),
    );
  private readonly onSMessage: PubSubListener = (message, channel) =>
    this.listeners.smessage.forEach((listener) =>
      (listener as (...args: string[]) => void)(channel, message),
    );

  /** Set while a connection this facade opened is coming up (ours only). */
  protected opening?: Promise<void>;
  private closed = false;

  constructor(
    readonly inner: Inner,
    private readonly events: Record<string, readonly string[]>,
    private readonly owned: boolean,
  ) {
    if (owned) void this.connected();
  }

  /**
   * Resolves once a connection we opened is up. A node-redis Cluster cannot route a command (or a
   * sharded subscription) before it has loaded its slots, and one whose first connection failed
   * stays closed: the next command then opens it again. A failure arrives as an 'error' event,
   * which the connection watch reads; the command itself then fails as the client refuses it.
   */
  protected connected(): Promise<void> {
    if (this.opening) return this.opening;
    if (!this.owned || this.closed || this.inner.isOpen) return Promise.resolve();
    this.opening = this.inner.connect().then(
      () => void (this.opening = undefined),
      () => void (this.opening = undefined),
    );
    return this.opening;
  }

  /** The client's own keys are never prefixed by node-redis. */
  readonly options: Record<string, unknown> = {};

  protected abstract send(args: (string | number)[], firstKey?: string): Promise<unknown>;
  abstract get status(): string;

  evalsha(sha: string, numberOfKeys: number, ...args: (string | number)[]): Promise<unknown> {
    const key = numberOfKeys > 0 ? String(args[0]) : undefined;
    return this.send(['EVALSHA', sha, numberOfKeys, ...args], key);
  }

  eval(script: string, numberOfKeys: number, ...args: (string | number)[]): Promise<unknown> {
    const key = numberOfKeys > 0 ? String(args[0]) : undefined;
    return this.send(['EVAL', script, numberOfKeys, ...args], key);
  }

  call(...args: (string | number)[]): Promise<unknown> {
    return this.send(args);
  }

  ping(): Promise<unknown> {
    return this.send(['PING']);
  }

  info(section?: string): Promise<unknown> {
    return this.send(section ? ['INFO', section] : ['INFO']);
  }

  del(...keys: string[]): Promise<unknown> {
    return this.send(['DEL', ...keys], keys[0]);
  }

  on(event: string, listener: Listener): this {
    if (event === 'message' || event === 'smessage') this.listeners[event].add(listener);
    for (const name of this.events[event] ?? []) this.inner.on(name, listener);
    return this;
  }

  off(event: string, listener: Listener): this {
    if (event === 'message' || event === 'smessage') this.listeners[event].delete(listener);
    for (const name of this.events[event] ?? []) this.inner.off(name, listener);
    return this;
  }

  subscribe(channel: string): Promise<unknown> {
    return this.connected().then(() => this.inner.subscribe(channel, this.onMessage));
  }

  // Unsubscribed by listener, not by name: node-redis then marks the channel as leaving, so a
  // subscribe sent before the UNSUBSCRIBE's reply is sent too. By name it sends nothing (the
  // channel looks subscribed) and drops the channel when that reply lands.
  unsubscribe(channel: string): Promise<unknown> {
    return this.connected().then(() => this.inner.unsubscribe(channel, this.onMessage));
  }

  ssubscribe(channel: string): Promise<unknown> {
    return this.connected().then(() => this.inner.sSubscribe(channel, this.onSMessage));
  }

  sunsubscribe(channel: string): Promise<unknown> {
    return this.connected().then(() => this.inner.sUnsubscribe(channel, this.onSMessage));
  }

  /** ioredis' QUIT: node-redis' close() answers the commands in flight first. */
  quit(): Promise<unknown> {
    this.closed = true;
    return this.inner.close();
  }

  disconnect(): void {
    this.closed = true;
    try {
      this.inner.destroy();
    } catch {
      // Closed already: nothing to drop.
    }
  }
}

class NodeRedisSingle extends NodeRedisFacade<SingleClient> {
  readonly isCluster = false;
  override readonly options: Record<string, unknown>;

  constructor(inner: SingleClient, owned: boolean) {
    super(inner, SINGLE_EVENTS, owned);
    this.options = addressOptions(
      inner.options?.url,
      inner.options?.socket,
      inner.options?.database,
    );
  }

  get status(): string {
    return this.inner.isReady ? 'ready' : this.inner.isOpen ? 'connecting' : 'end';
  }

  protected send(args: (string | number)[]): Promise<unknown> {
    return this.opening
      ? this.opening.then(() => this.inner.sendCommand(args.map(String)))
      : this.inner.sendCommand(args.map(String));
  }

  scan(cursor: string, ...args: (string | number)[]): Promise<unknown> {
    return this.send(['SCAN', cursor, ...args]);
  }

  wait(replicas: number, timeout: number): Promise<unknown> {
    return this.send(['WAIT', replicas, timeout]);
  }

  duplicate(): Redis {
    return new NodeRedisSingle(this.inner.duplicate(), true) as unknown as Redis;
  }
}

class NodeRedisCluster extends NodeRedisFacade<ClusterClient> {
  readonly isCluster = true;
  private slotSource?: readonly unknown[];
  private slotMap: (string[] | undefined)[] = [];

  constructor(inner: ClusterClient, owned: boolean) {
    super(inner, CLUSTER_EVENTS, owned);
  }

  get status(): string {
    if (!this.inner.isOpen) return 'end';
    return this.inner.masters.length > 0 ? 'ready' : 'connecting';
  }

  /** For the startup line: the root nodes, as `{ host, port }` (never a password). */
  get startupNodes(): { host?: string; port?: number }[] {
    return (this.inner._options?.rootNodes ?? []).map((node) =>
      addressOptions(node.url, node.socket),
    );
  }

  /**
   * ioredis' slot map (`slots[slot][0]` is the primary's `host:port`), rebuilt only when
   * node-redis replaces its own after a rediscovery.
   */
  get slots(): (string[] | undefined)[] {
    if (this.slotSource !== this.inner.slots) {
      this.slotSource = this.inner.slots;
      this.slotMap = this.inner.slots.map((shard) => (shard ? [shard.master.address] : undefined));
    }
    return this.slotMap;
  }

  protected send(args: (string | number)[], firstKey?: string): Promise<unknown> {
    return this.connected().then(() => this.inner.sendCommand(firstKey, false, args.map(String)));
  }

  /** A Cluster's nodes, each as a client of its own, as ioredis' `nodes()` gives them. */
  nodes(role: 'master' | 'all' = 'all'): Redis[] {
    const chosen =
      role === 'master' ? this.inner.masters : [...this.inner.masters, ...this.inner.replicas];
    return chosen.map((node) => new NodeRedisNode(this.inner, node) as unknown as Redis);
  }

  duplicate(): Cluster {
    return new NodeRedisCluster(this.inner.duplicate(), true) as unknown as Cluster;
  }

  /** Never asked for: node-redis follows a sharded channel's move itself. */
  refreshSlotsCache(callback?: () => void): void {
    callback?.();
  }
}

/** One node of a node-redis Cluster, reached through the Cluster's own connection to it. */
class NodeRedisNode {
  readonly options: { host: string; port: number };

  constructor(
    private readonly cluster: ClusterClient,
    private readonly node: ShardNode,
  ) {
    this.options = { host: node.host, port: node.port };
  }

  private send(args: (string | number)[]): Promise<unknown> {
    return this.cluster
      .nodeClient(this.node)
      .then((client) => client.sendCommand(args.map(String)));
  }

  call(...args: (string | number)[]): Promise<unknown> {
    return this.send(args);
  }

  ping(): Promise<unknown> {
    return this.send(['PING']);
  }

  info(section?: string): Promise<unknown> {
    return this.send(section ? ['INFO', section] : ['INFO']);
  }

  scan(cursor: string, ...args: (string | number)[]): Promise<unknown> {
    return this.send(['SCAN', cursor, ...args]);
  }
}

/** `host`/`port`/`path`/`db` as ioredis' options name them, from a URL or socket options. */
function addressOptions(
  url: string | undefined,
  socket: { host?: string; port?: number; path?: string } | undefined,
  database?: number,
): { host?: string; port?: number; path?: string; db?: number } {
  if (socket?.path) return { path: socket.path };
  let fromUrl: { host?: string; port?: number; db?: number } = {};
  if (url) {
    try {
      const parsed = new URL(url);
      const db = Number(parsed.pathname.slice(1)) || undefined;
      fromUrl = { host: parsed.hostname, port: Number(parsed.port) || 6379, db };
    } catch {
      // Unparsable: describe it by its socket options, or the defaults.
    }
  }
  return {
    host: socket?.host ?? fromUrl.host,
    port: socket?.port ?? fromUrl.port,
    db: database ?? fromUrl.db,
  };
}
