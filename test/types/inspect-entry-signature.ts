/**
 * Compile-time specification of the `nestjs-redis-lock/inspect` entry (checked by `tsc` in
 * `npm run lint`, never run): the shapes LockService's inspect(), list(), evict() and events hand
 * back are typed from there, and are not at the root, which keeps what users write or catch. Each
 * `@ts-expect-error` must stay an error.
 */
import type { LockLostListener, LockService } from 'nestjs-redis-lock';
import type {
  EvictedKind,
  EvictedLock,
  ListedLock,
  LockAcquiredEvent,
  LockEventName,
  LockEvents,
  LockInfo,
  LockHolderInfo,
  LockKind,
  LockListPage,
  LockMode,
  SemaphoreInfo,
} from 'nestjs-redis-lock/inspect';
// @ts-expect-error an inspection result is read, not written: it lives in nestjs-redis-lock/inspect
import type { LockInfo as _RootLockInfo } from 'nestjs-redis-lock';
// @ts-expect-error an event payload is read, not written: it lives in nestjs-redis-lock/inspect
import type { LockAcquiredEvent as _RootAcquiredEvent } from 'nestjs-redis-lock';

export async function results(locks: LockService): Promise<void> {
  const info: LockInfo = await locks.inspect('a');
  const kind: LockKind | undefined = info.kind;
  const semaphore: SemaphoreInfo | undefined = info.semaphore;
  const page: LockListPage = await locks.list({ count: 10 });
  const listed: ListedLock[] = page.locks;
  const evicted: EvictedLock | null = await locks.evict('a');
  const exclusive: EvictedKind<LockHolderInfo> | undefined = evicted?.removed.exclusive;
  void [kind, semaphore, listed, exclusive];
}

export function events(locks: LockService): void {
  const names: LockEventName[] = ['acquired', 'busy', 'released', 'lost', 'renewal-failed'];
  const onAcquired = (event: LockAcquiredEvent): void => {
    const mode: LockMode = event.mode;
    void mode;
  };
  const lost: LockLostListener = (...args: LockEvents['lost']) => void args[0].reason;
  locks.on('acquired', onAcquired).on('lost', lost);
  // @ts-expect-error the 'busy' payload has no fence
  locks.on('busy', (event: LockEvents['busy'][0]) => void event.fence);
  void names;
}
