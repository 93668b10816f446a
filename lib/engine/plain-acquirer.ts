import type { AcquireTry, LockBackend } from '../backends/lock-backend';
import { LockServiceClosedError } from '../errors/errors';
import { messages } from '../errors/messages';
import { traitsOf } from '../keys/lease-kind';
import type { LockRedisKeys } from '../keys/lock-keys';
import type { AcquireContext } from './acquire-context';
import { waitForLock } from './acquire-loop';
import type { Acquirer, AcquireOutcome, AcquireRequest } from './acquire-request';
import { monotonicElapsed, monotonicNow, newHolderToken, newToken } from '../util/clock';
import { HeldLock } from './held-lock';
import { raceAbort } from './race-abort';
import { settled } from '../util/settled';

/**
 * The shortest life of a waiting writer's entry without a refresh (ms), however short
 * `commandTimeout` is: a refresh sent every third of it must not have to race the network.
 */
const MIN_WRITER_ENTRY_MS = 1_000;

/**
 * Plain mode: each try asks for the lock under a new token, and a waiter sleeps until a release
 * message wakes it (one waiter per message in this process; every one of them when readers of a
 * read-write lock wait) or the holder's lease ends.
 */
export class PlainAcquirer implements Acquirer {
  /**
   * How long a waiting writer's entry holds back new readers without a refresh: the most a
   * writer that died while waiting delays them by. Room for a refresh taking a `commandTimeout`.
   */
  private readonly writerEntryMs: number;

  constructor(
    private readonly context: AcquireContext,
    private readonly backend: LockBackend,
  ) {
    this.writerEntryMs = Math.ceil(
      Math.max(MIN_WRITER_ENTRY_MS, 2 * context.options.commandTimeout),
    );
  }

  acquire(request: AcquireRequest): Promise<AcquireOutcome> {
    // No async layer: the uncontended call is one promise chain (a synchronous throw, such as
    // an aborted signal, still becomes a rejection).
    return settled(() => this.call(request));
  }

  private call(request: AcquireRequest): Promise<AcquireOutcome> {
    request.signal?.throwIfAborted();
    const started = monotonicElapsed(); // the wait budget's start
    const keys = this.context.keysOf(request.key, request.kind);
    // A writer that waits, with writer priority: its entry among the writers waiting. Its id is
    // drawn at the first try that waits, so an uncontended acquire pays nothing for it.
    let entered = false;
    const prioritised =
      traitsOf(keys.kind).waitsAsWriter && request.writerPriority !== false && request.wait > 0;
    let waitingWriter: AcquireTry['waitingWriter'];
    const waitingTry = (): AcquireTry => ({
      waitingWriter: prioritised
        ? (waitingWriter ??= {
            id: newToken(),
            entryMs: this.writerEntryMs,
            entered: () => void (entered = true),
          })
        : undefined,
    });
    return waitForLock(this.context, request, keys, started, {
      attempt: (queue) => this.attempt(request, keys, queue ? waitingTry() : undefined),
      maxSleep: Infinity,
      // Given up after entering the waiting set: the entry goes at once, waking the readers it
      // held back (rather than holding them until it lapses).
      gaveUp: () => {
        if (!entered || !waitingWriter || !this.backend.leaveWriters) return;
        this.context.cleanUp(this.backend.leaveWriters(keys, waitingWriter.id));
      },
    });
  }

  /** One try: a lock, or the ms until another try is worth it (the holder's remaining lease). */
  private attempt(
    request: AcquireRequest,
    keys: LockRedisKeys,
    how?: AcquireTry,
  ): Promise<HeldLock | number> {
    const { context } = this;
    const token = newHolderToken(context.options.instanceId);
    const sentAt = monotonicNow();
    const sent = this.backend.acquire(keys, token, Math.ceil(request.ttl), how);
    // Settled: a signal aborted meanwhile rejects, and the grant that may still land is freed.
    const answer = settled(() =>
      raceAbort(context.bounded(sent, 'acquire', `lock "${request.key}"`), request.signal),
    );
    return answer.then(
      (fence) => {
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
      },
      (error: unknown) => {
        // Timed out or cancelled while the server may still grant it: free that grant when it
        // lands.
        context.cleanUp(
          sent.then((late) => (late > 0 ? this.backend.release(keys, token) : false)),
        );
        throw error;
      },
    );
  }
}
