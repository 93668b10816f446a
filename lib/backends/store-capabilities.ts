import { leaderMessages, messages, readWriteMessages, semaphoreMessages } from '../errors/messages';
import { RedisLockConfigError } from '../errors/errors';
import type { LeaseKind } from '../keys/lease-kind';
import type { ResolvedRedisLockOptions } from '../options/redis-lock-options';
import { isClusterClient, type RedisClient } from '../redis/redis-client';

/**
 * What a store serves, as data: the kinds of lease it can grant and the strategies it has. The one
 * check below reads it — at startup against the module's options, at a call or a decoration
 * against that call's — so an unsupported combination is refused in one place, with one message.
 */
export interface StoreCapabilities {
  /** How the options name this store, in refusals: `redlock`, `cluster`, `replicaAck`, … */
  readonly store: string;
  /** Per kind of lease: the key alone (mutex, writer), a reader's share, a semaphore's permit. */
  readonly kinds: Readonly<Record<LeaseKind['type'], boolean>>;
  /** Fair mode: waiters queue in the store, and a release hands the lock to the first in line. */
  readonly fair: boolean;
  /**
   * Multi-key locks in one atomic step (`acquireAll`): for any keys, only for keys of one Cluster
   * slot, or never (then the engine takes the keys one by one in lock order).
   */
  readonly acquireAll: 'any-keys' | 'one-slot' | 'never';
  /** Grants that wait for replicas (`replicaAck`). */
  readonly replicaAck: boolean;
}

const ALL_KINDS = { exclusive: true, read: true, semaphore: true, leader: true } as const;

/** A single primary, optionally Sentinel-managed. */
export const ONE_REDIS: StoreCapabilities = {
  store: 'redis',
  kinds: ALL_KINDS,
  fair: true,
  acquireAll: 'any-keys',
  replicaAck: true,
};

/** A single primary whose grants wait for replicas: a grant is the granter's, key by key. */
export const ACKNOWLEDGED_REDIS: StoreCapabilities = {
  ...ONE_REDIS,
  store: 'replicaAck',
  // A fair hand-off is granted by the releaser, where no WAIT runs; all-at-once waits per key.
  fair: false,
  acquireAll: 'never',
};

/** A Redis Cluster: every kind (a lock's keys share a slot), all-at-once only within one slot. */
export const CLUSTER: StoreCapabilities = {
  store: 'cluster',
  kinds: ALL_KINDS,
  fair: true,
  acquireAll: 'one-slot',
  replicaAck: false,
};

/**
 * A Redlock quorum: exclusive locks only; no single server holds a queue, shares or a count. Nor a
 * term: a role's fence must rise by one per election, and a quorum's counters (one per node, each
 * raised by the grants it took part in) agree on no single sequence a leader could fence with.
 */
export const REDLOCK: StoreCapabilities = {
  store: 'redlock',
  kinds: { exclusive: true, read: false, semaphore: false, leader: false },
  fair: false,
  acquireAll: 'never',
  replicaAck: false,
};

/** This process's memory (the testing module): everything one Redis serves, without replicas. */
export const MEMORY: StoreCapabilities = { ...ONE_REDIS, store: 'memory', replicaAck: false };

/** The capabilities of the store the connection options pick, known before anything connects. */
export function capabilitiesFor(options: ResolvedRedisLockOptions): StoreCapabilities {
  if (options.redlock) return REDLOCK;
  return redisCapabilities(
    !!options.cluster || isClusterClient(options.redis as RedisClient),
    !!options.replicaAck,
  );
}

/** One Redis or a Cluster, with or without `replicaAck`. */
export function redisCapabilities(cluster: boolean, acknowledged: boolean): StoreCapabilities {
  if (cluster) return CLUSTER;
  return acknowledged ? ACKNOWLEDGED_REDIS : ONE_REDIS;
}

/**
 * Refuses module options the store cannot serve (`fair`, `replicaAck`, `leaders`), naming the option: at
 * `forRoot` / `forRootAsync` and `new LockService`, before any connection opens.
 */
export function assertServesOptions(
  capabilities: StoreCapabilities,
  options: Pick<ResolvedRedisLockOptions, 'fair' | 'replicaAck'> &
    Partial<Pick<ResolvedRedisLockOptions, 'leaders'>>,
): void {
  const { store } = capabilities;
  if (options.leaders?.length && !capabilities.kinds.leader) {
    throw new RedisLockConfigError(leaderMessages.unsupportedStore(store));
  }
  if (options.replicaAck && !capabilities.replicaAck) {
    throw new RedisLockConfigError(
      messages.badOption('replicaAck', `set with ${store}`, 'a single primary'),
    );
  }
  if (options.fair && !capabilities.fair) {
    throw new RedisLockConfigError(
      messages.badOption(
        'fair',
        `set with ${store}`,
        'one Redis or a Cluster without replicaAck (a hand-off is granted by the releaser)',
      ),
    );
  }
}

/**
 * Refuses a kind of lease the store cannot grant (a read lock or permits on Redlock), naming the
 * option that asked for it: at decoration for `@Locked`, at the call for the others.
 */
export function assertServesKind(capabilities: StoreCapabilities, kind: LeaseKind | undefined) {
  if (!kind || capabilities.kinds[kind.type]) return;
  if (kind.type === 'leader') {
    throw new RedisLockConfigError(leaderMessages.unsupportedStore(capabilities.store));
  }
  throw new RedisLockConfigError(
    kind.type === 'semaphore' ? semaphoreMessages.redlock() : readWriteMessages.redlock(),
  );
}
