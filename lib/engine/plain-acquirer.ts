import type { AcquireTry, LockBackend } from '../backends/lock-backend';
import { LockServiceClosedError, type RedisUnavailableError } from '../errors/errors';
import { messages } from '../errors/messages';
import { traitsOf } from '../keys/lease-kind';
import type { LockRedisKeys } from '../keys/lock-keys';
import type { AcquireContext } from './acquire-context';
import { CallTry, waitAfterFirstTry, type CallTries } from './acquire-loop';
import type { Acquirer, AcquireEnd, AcquireOutcome, AcquireRequest } from './acquire-request';
import { monotonicNow, newHolderToken, newToken, wallAtLastReading } from '../util/clock';
import { HeldLock } from './held-lock';
import { retryPause, unavailableWorthRetrying } from './backoff';
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
 *
 * The first try is the one most calls end with, so it costs one command and one step: its answer
 * is read, turned into a lock (or a busy answer), reported and mapped for the caller where the
 * command's bound hears it (`AcquireContext.bounded`). Only a busy answer with time to wait, or
 * Redis out of reach, goes on to the waiting loop (`waitAfterFirstTry`).
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

  acquire<T>(request: AcquireRequest, report: AcquireEnd<T>): Promise<T> {
    // Synchronous refusals (an aborted signal, shutdown, connections that cannot work) throw:
    // the report fails the call with them, nothing sent.
    request.signal?.throwIfAborted();
    const { started } = report; // the wait budget's start
    const keys = this.context.keysOf(request.key, request.kind);
    const try1 = this.send(request, keys);
    const first = (fence: number): T | Promise<T> => {
      if (fence > 0) {
        let lock: HeldLock;
        try {
          lock = this.granted(request, keys, try1.token, fence, try1.sentAt);
        } catch (error) {
          return report.failed(error);
        }
        return report.settled({ lock });
      }
      if (request.wait <= 0) return report.settled({ retryAfterMs: -fence, waited: 0 });
      return this.wait(request, keys, started, report, -fence);
    };
    const firstFailed = (error: unknown): T | Promise<T> => {
      // Timed out or cancelled while the server may still grant it: free that grant when it lands.
      this.freeLateGrant(keys, try1.token, try1.sent);
      let unavailable: RedisUnavailableError;
      try {
        // Redis out of reach with budget left: try again after a pause. Anything else: thrown.
        unavailable = unavailableWorthRetrying(
          error,
          this.context.connections,
          started + request.wait,
        );
      } catch (thrown) {
        return report.failed(thrown);
      }
      return this.wait(request, keys, started, report, retryPause(0), unavailable);
    };
    const { signal } = request;
    if (signal) {
      // Settled: a signal aborted meanwhile rejects, and the grant that may still land is freed.
      const answer = settled(() =>
        raceAbort(
          this.context.bounded(try1.sent, 'acquire', () => subjectOf(request)),
          signal,
        ),
      );
      return answer.then(first, firstFailed);
    }
    return this.context.bounded(try1.sent, 'acquire', () => subjectOf(request), first, firstFailed);
  }

  /**
   * The wait after a first try that found the lock busy for `retryAfterMs`, or Redis out of reach
   * (`unavailable`).
   */
  private wait<T>(
    request: AcquireRequest,
    keys: LockRedisKeys,
    started: number,
    report: AcquireEnd<T>,
    retryAfterMs: number,
    unavailable?: RedisUnavailableError,
  ): Promise<T> {
    const tries = this.tries(request, keys);
    const call = new CallTry(this.context, tries, started + request.wait, unavailable);
    const waiting = waitAfterFirstTry(
      this.context,
      request,
      keys,
      started,
      tries,
      call,
      retryAfterMs,
    );
    return waiting.then(
      (outcome: AcquireOutcome) => report.settled(outcome),
      (error: unknown) => report.failed(error),
    );
  }

  /** How the waiting loop tries again: as a writer that holds readers back, where it is one. */
  private tries(request: AcquireRequest, keys: LockRedisKeys): CallTries {
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
    return {
      attempt: (queue) => this.attempt(request, keys, queue ? waitingTry() : undefined),
      maxSleep: Infinity,
      // Given up after entering the waiting set: the entry goes at once, waking the readers it
      // held back (rather than holding them until it lapses).
      gaveUp: () => {
        if (!entered || !waitingWriter || !this.backend.leaveWriters) return;
        this.context.cleanUp(this.backend.leaveWriters(keys, waitingWriter.id));
      },
    };
  }

  /** One try under a new token, sent now: the command and what its lock would be made of. */
  private send(
    request: AcquireRequest,
    keys: LockRedisKeys,
    how?: AcquireTry,
  ): { token: string; sentAt: number; sent: Promise<number> } {
    const { context } = this;
    if (context.isClosing()) throw new LockServiceClosedError(messages.shuttingDown());
    const down = context.connections.unavailable();
    if (down) throw down;
    const sentAt = monotonicNow();
    const token = newHolderToken(context.options.instanceId, wallAtLastReading());
    const sent = this.backend.acquire(keys, token, Math.ceil(request.ttl), how);
    return { token, sentAt, sent };
  }

  /** A later try of the waiting loop: a lock, or the ms until another try is worth it. */
  private attempt(
    request: AcquireRequest,
    keys: LockRedisKeys,
    how?: AcquireTry,
  ): Promise<HeldLock | number> {
    const { token, sentAt, sent } = this.send(request, keys, how);
    const answer = settled(() =>
      raceAbort(
        this.context.bounded(sent, 'acquire', () => subjectOf(request)),
        request.signal,
      ),
    );
    return answer.then(
      (fence) => (fence > 0 ? this.granted(request, keys, token, fence, sentAt) : -fence),
      (error: unknown) => {
        this.freeLateGrant(keys, token, sent);
        throw error;
      },
    );
  }

  /** The lock a grant gave, watched from now on; undone when shutdown began meanwhile. */
  private granted(
    request: AcquireRequest,
    keys: LockRedisKeys,
    token: string,
    fence: number,
    sentAt: number,
  ): HeldLock {
    const { context } = this;
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

  /** A try whose answer the call stopped waiting for: its grant, if it lands, is freed at once. */
  private freeLateGrant(keys: LockRedisKeys, token: string, sent: Promise<number>): void {
    this.context.cleanUp(
      sent.then((late) => (late > 0 ? this.backend.release(keys, token) : false)),
    );
  }
}

/** What an acquire command is about, for its failure's message. */
function subjectOf(request: AcquireRequest): string {
  return `lock "${request.key}"`;
}
