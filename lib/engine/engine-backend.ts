import { servesFairMode, type FairLockBackend, type LockBackend } from '../backends/lock-backend';
import { messages } from '../errors/messages';
import { RedisLockConfigError } from '../errors/redis-lock-config.error';
import { ConnectionWatch } from '../redis/connection-watch';

/**
 * The backend an engine runs on. `createBackend(options)` gives the real one for the options
 * (one Redis, a Cluster, or a Redlock quorum, with the watch over its connections); a unit test
 * passes a fake, without connections.
 */
export interface EngineBackend {
  backend: LockBackend;
  /**
   * The health of the backend's connections: lock calls fail at once, with the cause, while they
   * cannot work. Absent for a backend without connections (an in-memory fake): always healthy.
   */
  connections?: ConnectionWatch;
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
