// The `nestjs-redis-lock/inspect` entry point: the shapes the library hands you to read — the
// results of LockService's inspect(), list() and evict(), and the payloads of its events. Types
// only (this entry has no runtime code); the root entry keeps what you write, call or catch.
export type {
  LeaseHolderInfo,
  ListedLock,
  LockHolderInfo,
  LockInfo,
  LockKind,
  LockListPage,
  LockWaiterInfo,
  ReadersInfo,
  SemaphoreInfo,
} from './backends/lock-info';
export type { EvictedKind, EvictedKinds, EvictedLock } from './backends/lock-eviction';
export type { LeaderInfo } from './service/leader/leader-info';
export type {
  LeaderElectedEvent,
  LeaderRevokedEvent,
  LockAcquiredEvent,
  LockBusyEvent,
  LockEventName,
  LockEvents,
  LockReleasedEvent,
  LockRenewalFailedEvent,
} from './engine/lock-events';
export type { LockMode } from './telemetry/lock-mode';
