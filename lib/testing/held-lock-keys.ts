import { lockContext } from '../locking/lock-context';

/**
 * The keys of the locks the running call chain holds, outermost first: what a `@Locked` method
 * or a `withLock` callback up the chain took, and has not released. Empty outside every lock.
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
  return [...(held?.values() ?? [])].filter((hold) => !hold.settled).map((hold) => hold.lock.key);
}
