export { RedisLockError } from './redis-lock.error';
export { LockNotAcquiredError } from './lock-not-acquired.error';
export { LockLostError, type LockLostReason } from './lock-lost.error';
export { LockServiceClosedError } from './lock-service-closed.error';
export { LockKeyError } from './lock-key.error';
export { LockUpgradeError } from './lock-upgrade.error';
export { RedisLockConfigError } from './redis-lock-config.error';
export { RedisUnavailableError } from './redis-unavailable.error';
export { RedisCommandError } from './redis-command.error';
