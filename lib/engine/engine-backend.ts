import { createBackend } from '../backends/create-backend';
import { servesFairMode, type FairLockBackend, type LockBackend } from '../backends/lock-backend';
import { assertServesOptions } from '../backends/store-capabilities';
import { messages } from '../errors/messages';
import { RedisLockConfigError } from '../errors/errors';
import type { ResolvedRedisLockOptions } from '../options/redis-lock-options';
import { ConnectionWatch } from '../redis/connection-watch';

/**
 * A lock store as a `LockService` runs on it: the backend (one Redis, a Cluster, a Redlock quorum,
 * or memory) and the watch over its connections. `RedisLockModule` provides one under `LOCK_STORE`,
 * built from its options; `RedisLockTestingModule` provides an in-memory one there instead. Opaque
 * outside the package: its members are internal.
 */
export interface LockStore {
  /** @internal */
  readonly backend: LockBackend;
  /**
   * The health of the backend's connections: lock calls fail at once, with the cause, while they
   * cannot work. Absent for a backend without connections (an in-memory fake): always healthy.
   * @internal
   */
  readonly connections?: ConnectionWatch;
  /**
   * Whether the service that runs on it closes it, last in its `close()` (after the drain and
   * the releases): true for a store made for that one service (`createLockStore`, the modules'
   * factories). Otherwise its creator closes it, after the service. @internal
   */
  readonly closedByService?: boolean;
}

/** Stores made for one service that a service took on (and so closes): see `claimStore`. */
const claimed = new WeakSet<LockStore>();

/** A service takes on a store made for it: it closes it, last in its `close()`. */
export function claimStore(store: LockStore): boolean {
  if (!store.closedByService) return false;
  claimed.add(store);
  return true;
}

/**
 * Whether a store made for one service still waits for that service: none took it on (its
 * `LockService` was replaced by a test double, say), so whoever made it must close it.
 */
export function isUnclaimed(store: LockStore): boolean {
  return store.closedByService === true && !claimed.has(store);
}

/** The name the engine's internals know a store by. */
export type EngineBackend = LockStore;

/**
 * The store the options describe, made for one service (which closes it): refuses first what that
 * store cannot serve, before it connects.
 */
export function createLockStore(options: ResolvedRedisLockOptions): LockStore {
  return { ...createBackend(options), closedByService: true };
}

/**
 * Refuses a store that cannot serve the module's options: the check `createLockStore` made before
 * connecting, made again for a store given from elsewhere (the testing module's, a test's fake).
 */
export function assertStoreServes(store: LockStore, options: ResolvedRedisLockOptions): void {
  assertServesOptions(store.backend.capabilities, options);
}

/** A watch over no connections: never blocked, it lets every command through as it is. */
export function noConnections(): ConnectionWatch {
  return new ConnectionWatch([], 1, 'an in-memory backend');
}

/** `backend`, checked once to serve fair mode; throws a config error when it does not. */
export function fairBackendOf(backend: LockBackend): FairLockBackend {
  if (servesFairMode(backend)) return backend;
  throw new RedisLockConfigError(
    messages.badOption('fair', true, 'false with a backend that has no fair-mode commands'),
  );
}
