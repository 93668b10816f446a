import { lockContext } from '../locking/lock-context';

/**
 * The keys of the locks the running call chain holds, outermost first: what a `@Locked` method
 * or a `withLock` callback up the chain took, and has not released (every key of a multi-key
 * lock, in lock order). Empty outside every lock.
 *
 * For a test asserting "this ran under lock X": record it where the work happens (a mocked
 * collaborator), and assert after the call.
 *
 * @example
 * ```ts
 * let held: string[] = [];
 * payments.charge.mockImplementation(async () => { held = heldLockKeys(); });
 * await orders.place('7');
 * expect(held).toEqual(['order:7']);
 * ```
 */
export function heldLockKeys(): string[] {
  const held = lockContext.getStore()?.held;
  // A multi-key lock is filed under each of its keys: listed once, as every key it holds.
  const holds = new Set([...(held?.values() ?? [])].filter((hold) => !hold.settled));
  return [...holds].flatMap((hold) => hold.lock.keys ?? [hold.lock.key]);
}
