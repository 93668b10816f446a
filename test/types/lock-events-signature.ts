/**
 * Compile-time specification of `LockService.on()` / `off()` (checked by `tsc` in `npm run lint`,
 * never run): each event's listener gets its own payload type, `'lost'` keeps its `(error, lock)`
 * form, and unknown events or mismatched payloads do not compile. Each `@ts-expect-error` below
 * must stay an error — if the typing were lost, tsc would report the unused directive.
 */
import type { LockHandle, LockLostError, LockLostListener, LockService } from 'nestjs-redis-lock';

declare const locks: LockService;

export function accepted(): void {
  locks
    .on('acquired', ({ key, fence, waitedMs, mode }) => void [key.length, fence + waitedMs, mode])
    .on('busy', ({ waitedMs, retryAfterMs }) => void (waitedMs + retryAfterMs))
    .on('released', async ({ heldMs }) => void heldMs)
    .on('renewal-failed', ({ keys, error }) => void [keys.join(), error])
    .on('lost', (error: LockLostError, lock: LockHandle) => void [error.reason, lock.fence]);
  const lost: LockLostListener = (error, lock) => void [error.reason, lock.key];
  locks.on('lost', lost).off('lost', lost);
}

export function rejected(): void {
  // @ts-expect-error not an event
  locks.on('expired', () => undefined);
  // @ts-expect-error 'busy' has no fence
  locks.on('busy', ({ fence }) => void fence);
  // @ts-expect-error 'lost' passes the error first, not a payload object
  locks.on('lost', ({ heldMs }: { heldMs: number }) => void heldMs);
  // @ts-expect-error a 'released' listener cannot be removed from 'acquired' with another payload
  locks.off('acquired', (event: { heldMs: number }) => void event);
}
