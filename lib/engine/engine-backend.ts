import { servesFairMode, type FairLockBackend, type LockBackend } from '../backends/lock-backend';
import { messages } from '../errors/messages';
import { RedisLockConfigError } from '../errors/redis-lock-config.error';

/** `backend`, checked once to serve fair mode; throws a config error when it does not. */
export function fairBackendOf(backend: LockBackend): FairLockBackend {
  if (servesFairMode(backend)) return backend;
  throw new RedisLockConfigError(
    messages.badOption('fair', true, 'false with a backend that has no fair-mode commands'),
  );
}
