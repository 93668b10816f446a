// The public API, named one by one (as @nestjs/terminus does): anything not here is internal.
// It keeps what users write, call or catch; the shapes they only read (inspection results, event
// payloads) are in `nestjs-redis-lock/inspect` (lib/inspect.ts).
export { RedisLockModule } from './module/redis-lock.module';
export { REDIS_LOCK_OPTIONS } from './module/redis-lock.module-definition';
export { LOCK_STORE } from './module/lock-store';
export type { LockStore } from './engine/lock-engine';
export type {
  ClusterConnectionOptions,
  LockErrorDetails,
  LockExceptionFactory,
  LockFailure,
  OnBusyPolicy,
  OnLostPolicy,
  RedisLockModuleOptions,
  RedlockOptions,
  ReplicaAckOptions,
  ResolvedRedisLockOptions,
  StartupCheckMode,
} from './options/redis-lock-options';
export { LockService } from './service/lock.service';
export type { AcquireOptions, LockedOptions, WithLockOptions } from './options/lock-call-options';
export type { ReadWriteMode } from './options/read-write-options';
export type { LockHandle } from './engine/lock-handle';
export type { MultiLockHandle } from './engine/multi-lock-handle';
export type { LockEventListener, LockLostListener } from './engine/lock-events';
export type { TelemetryKeys, TelemetryOptions } from './options/telemetry-options';
export {
  Locked,
  type LockableMethod,
  type LockedMethodDecorator,
  type LockedNeedsAsyncMethod,
  type LockKeyFactory,
} from './decorator/locked.decorator';
export { LockedInterceptor } from './decorator/locked.interceptor';
export { WhenLeader } from './decorator/when-leader.decorator';
export type { LeaderHandle } from './service/leader/leader-handle';
export type { LeaderRoleOption, LeaderTerm, LeadOptions } from './options/leader-options';
export type { LockSkippedAck } from './decorator/locked-response';
export { LockExceptionFilter } from './transports/lock-exception.filter';
export type { LockTransportError } from './transports/messages/lock-transport-error';
export {
  LockGraphQLError,
  type LockGraphQLErrorCode,
  type LockGraphQLErrorExtensions,
} from './transports/graphql/lock-graphql-error';
export { currentLock, outsideLocks } from './locking/lock-context';
export type {
  NodeRedisCompatibleClient,
  NodeRedisCompatibleCluster,
  RedisClient,
  RedisConnectionOption,
} from './redis/redis-client';
export {
  LeadershipRevokedError,
  NotLeaderError,
  LockKeyError,
  LockLostError,
  LockNotAcquiredError,
  LockReentryError,
  LockServiceClosedError,
  LockUpgradeError,
  RedisCommandError,
  RedisLockConfigError,
  RedisLockError,
  RedisUnavailableError,
  SemaphoreLimitConflictError,
  type LeaderRevokedReason,
  type LockLostReason,
} from './errors/errors';
