import { messages } from '../errors/messages';
import { RedisUnavailableError } from '../errors/errors';
import { describeAddress } from './redis-address';
import type { RedisClient } from './redis-client';

/**
 * One client's health as lock calls need it. A connection that has never come up since startup,
 * or that Redis turned away for good (wrong password), cannot serve a lock command: waiting
 * `commandTimeout` for it only hides the real cause. A once-healthy connection that drops is
 * different: ioredis reconnects, and calls retry within their `wait` budget.
 */
export class ClientWatch {
  private everReady: boolean;
  private lastError?: Error;
  /** An error no reconnect fixes (credentials); cleared only by a successful connection. */
  private finalError?: Error;
  private readonly listeners = new Set<() => void>();
  private readonly reconnectListeners = new Set<() => void>();
  private readonly onReady = (): void => {
    const again = this.everReady;
    this.everReady = true;
    this.finalError = undefined;
    watchEpoch++;
    if (again) this.reconnected();
  };
  /** A Cluster dropped a node from its pool (a failover or a reshard moved its slots away). */
  private readonly onNodeGone = (): void => this.reconnected();
  private readonly onError = (error: Error): void => {
    this.lastError = error;
    watchEpoch++;
    if (isCredentialsError(error)) this.finalError = error;
    if (this.blockedBy()) for (const listener of [...this.listeners]) listener();
  };

  constructor(
    readonly client: RedisClient,
    readonly address: string = describeAddress(client),
  ) {
    this.everReady = client.status === 'ready';
    client.on('ready', this.onReady);
    client.on('error', this.onError);
    client.on('-node', this.onNodeGone);
  }

  /** Stops watching: takes back the listeners added to the client (it may be the app's own). */
  detach(): void {
    this.client.off('ready', this.onReady);
    this.client.off('error', this.onError);
    this.client.off('-node', this.onNodeGone);
  }

  /**
   * Calls `listener` when the client came back after losing its server, or (a Cluster) lost a
   * node: a server that restarted or failed over may have lost what it had not yet replicated.
   */
  onReconnected(listener: () => void): void {
    this.reconnectListeners.add(listener);
  }

  private reconnected(): void {
    for (const listener of this.reconnectListeners) listener();
  }

  /** Whether the client has been ready at least once since it was created. */
  get hasBeenReady(): boolean {
    return this.everReady;
  }

  /** The error that keeps lock commands from succeeding now, or undefined. */
  blockedBy(): Error | undefined {
    return this.finalError ?? (this.everReady ? undefined : this.lastError);
  }

  /** Calls `listener` when an error arrives while blocked; returns its removal. */
  onBlocked(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  }
}

/**
 * The connections of one backend: one client, or the nodes of a Redlock quorum (blocked only
 * when too few of them can answer for a quorum).
 */
export class ConnectionWatch {
  /** `watchEpoch` when `healthy` was last worked out. */
  private seenEpoch = -1;
  /** Every node has been ready and none is blocked: as of `seenEpoch`. */
  private healthy = false;

  constructor(
    readonly nodes: readonly ClientWatch[],
    /** How many nodes must be usable: 1, or Redlock's majority. */
    readonly quorum: number,
    /** Where the module connects, for the startup line: an address or a topology. */
    readonly target: string,
  ) {}

  /** Stops watching every node's client (at close). */
  detach(): void {
    for (const node of this.nodes) node.detach();
  }

  /** Calls `listener` whenever a node's client came back, or a Cluster lost a node. */
  onReconnected(listener: () => void): void {
    for (const node of this.nodes) node.onReconnected(listener);
  }

  /** A fresh error naming each blocked address and its cause, when too few nodes are usable. */
  unavailable(): RedisUnavailableError | undefined {
    // Asked before every lock command: the healthy answer allocates nothing, and is worked out
    // again only after a node's client reported something.
    if (this.isHealthy()) return undefined;
    if (this.nodes.every(isUnblocked)) return undefined;
    const blocked: { address: string; cause: Error }[] = [];
    for (const node of this.nodes) {
      const cause = node.blockedBy();
      if (cause) blocked.push({ address: node.address, cause });
    }
    const [first] = blocked;
    if (!first || this.nodes.length - blocked.length >= this.quorum) return undefined;
    const message = blocked
      .map(({ address, cause }) => messages.connectionFailed(address, ...explain(cause)))
      .join(' ');
    return new RedisUnavailableError(message, { cause: first.cause });
  }

  /**
   * `command`, or a prompt rejection when the connection is blocked now or becomes so before the
   * command answers (it then stays in ioredis' offline queue; callers treat it as unanswered).
   */
  guard<T>(command: Promise<T>): Promise<T> {
    const down = this.unavailable();
    if (down) {
      command.catch(() => undefined);
      return Promise.reject(down);
    }
    // Once every node has come up, only a credentials error can block it, and ioredis fails the
    // queued commands with it at once: no race needed on the hot path.
    if (this.isHealthy() || this.nodes.every(hasBeenReady)) return command;
    return new Promise<T>((resolve, reject) => {
      const removals = this.nodes.map((node) =>
        node.onBlocked(() => {
          const blocked = this.unavailable();
          if (!blocked) return;
          settle();
          reject(blocked);
        }),
      );
      const settle = (): void => removals.forEach((remove) => remove());
      command.then(
        (value) => {
          settle();
          resolve(value);
        },
        (error: unknown) => {
          settle();
          reject(error);
        },
      );
    });
  }

  /** Every node has been ready and none is blocked now. */
  private isHealthy(): boolean {
    if (this.seenEpoch !== watchEpoch) {
      this.seenEpoch = watchEpoch;
      this.healthy = this.nodes.every((node) => node.hasBeenReady && isUnblocked(node));
    }
    return this.healthy;
  }
}

/**
 * Counts the events any `ClientWatch` has seen (ready, error): what a node's health depends on.
 * A watch whose answer was worked out at the current count need not work it out again.
 */
let watchEpoch = 0;

const isUnblocked = (node: ClientWatch): boolean => node.blockedBy() === undefined;
const hasBeenReady = (node: ClientWatch): boolean => node.hasBeenReady;

/** Redis refused the credentials: reconnecting with the same ones cannot help. */
function isCredentialsError(error: Error): boolean {
  return /^(WRONGPASS|NOAUTH)\b|invalid password/i.test(error.message);
}

/**
 * What a connection error means, and what to do: `[what happened, the raw error, advice]`.
 * ioredis' Cluster reports the last node's error inside its own.
 */
export function explain(error: Error): [reason: string, detail: string, advice: string] {
  const inner = (error as { lastNodeError?: Error }).lastNodeError ?? error;
  const code = (inner as NodeJS.ErrnoException).code ?? /^[A-Z]+/.exec(inner.message)?.[0];
  const detail = inner.message;
  const reachable =
    'Check that Redis runs there and that the `redis` option (REDIS_URL) points at it.';
  switch (code) {
    case 'ECONNREFUSED':
      return ['connection refused', detail, reachable];
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return ['host name not found', detail, reachable];
    case 'ETIMEDOUT':
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return [
        'no route or no answer',
        detail,
        'Check the network path (firewall, security group).',
      ];
    case 'WRONGPASS':
      return ['wrong username or password', detail, messages.credentialsAdvice()];
    case 'NOAUTH':
      return ['a password is required and none was sent', detail, messages.credentialsAdvice()];
    case 'NOPERM':
      return [
        'the ACL user may not run a command the connection needs',
        detail,
        messages.aclAdvice(),
      ];
  }
  if (/invalid password/i.test(detail)) {
    return ['wrong password', detail, messages.credentialsAdvice()];
  }
  if (/certificate|SSL|TLS/i.test(`${code ?? ''} ${detail}`)) {
    return ['TLS handshake failed', detail, 'Check `rediss://` and the `tls` options.'];
  }
  return ['no connection', detail, reachable];
}
