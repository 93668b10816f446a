/**
 * Compile-time specification of the multi-key overloads (checked by `tsc` in `npm run lint`,
 * never run): a string call keeps today's `LockHandle`, an array gives a `MultiLockHandle`. Each
 * `@ts-expect-error` must stay an error.
 */
import type { LockHandle, LockService, MultiLockHandle } from 'nestjs-redis-lock';

export async function overloads(locks: LockService): Promise<void> {
  const one: LockHandle = await locks.acquire('a');
  // @ts-expect-error a single-key handle has no per-key fences
  void one.fences;
  const many: MultiLockHandle = await locks.acquire(['a', 'b']);
  const fences: Readonly<Record<string, number>> = many.fences;
  const keys: readonly string[] = many.keys;
  const maybe: MultiLockHandle | null = await locks.tryAcquire(['a', 'b'] as const);
  const single: LockHandle | null = await locks.tryAcquire('a');
  await locks.withLock(['a', 'b'], (lock) => lock.fences['a']);
  // @ts-expect-error the callback of a single-key call gets a LockHandle
  await locks.withLock('a', (lock) => lock.fences);
  void [fences, keys, maybe, single];
}
