import type { LockBackend } from '../backends/lock-backend';
import { LockServiceClosedError } from '../errors/lock-service-closed.error';
import { messages } from '../errors/messages';
import type { LockRedisKeys } from '../keys/lock-keys';
import type { AcquireContext } from './acquire-context';
import { waitForLock } from './acquire-loop';
import type { Acquirer, AcquireOutcome, AcquireRequest } from './acquire-request';
import { monotonicNow, newToken } from '../util/clock';
import { HeldLock } from './held-lock';
import { raceAbort } from './race-abort';

/**
 * Plain mode: each try asks for the lock under a new token, and a waiter sleeps until a release
 * message wakes it (one waiter per message in this process) or the holder's lease ends.
 */
export class PlainAcquirer implements Acquirer {
  constructor(
    private readonly context: AcquireContext,
    private readonly backend: LockBackend,
  ) {}

  async acquire(request: AcquireRequest): Promise<AcquireOutcome> {
    request.signal?.throwIfAborted();
    const started = monotonicNow();
    const keys = this.context.keysOf(request.key, request.kind);
    return waitForLock(this.context, request, keys, started, {
      attempt: () => this.attempt(request, keys),
      maxSleep: Infinity,
    });
  }

  /** One try: a lock, or the ms until another try is worth it (the holder's remaining lease). */
  private async attempt(request: AcquireRequest, keys: LockRedisKeys): Promise<HeldLock | number> {
    const { context } = this;
    const token = newToken();
    const sentAt = monotonicNow();
    const sent = this.backend.acquire(keys, token, Math.ceil(request.ttl));
    let fence: number;
    try {
      fence = await raceAbort(
        context.bounded(sent, 'acquire', `lock "${request.key}"`),
        request.signal,
      );
    } catch (error) {
      // Timed out or cancelled while the server may still grant it: free that grant when it lands.
      context.cleanUp(sent.then((late) => (late > 0 ? this.backend.release(keys, token) : false)));
      throw error;
    }
    if (fence <= 0) return -fence;
    if (context.isClosing()) {
      // Granted while close() ran: it took its snapshot of held locks already, so undo it here.
      context.cleanUp(this.backend.release(keys, token));
      throw new LockServiceClosedError(messages.shuttingDown());
    }
    const lock = new HeldLock({
      operations: context.engine,
      key: request.key,
      redisKeys: keys,
      token,
      fence,
      lease: request.ttl,
      startedAt: sentAt,
      owner: context.engine,
    });
    return context.track(lock, request);
  }
}
