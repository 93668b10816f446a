import type { FairAcquireReply, FairLockBackend } from '../backends/lock-backend';
import { LockServiceClosedError, type RedisUnavailableError } from '../errors/errors';
import { messages } from '../errors/messages';
import type { LockRedisKeys } from '../keys/lock-keys';
import type { AcquireContext } from './acquire-context';
import { CallTry, waitAfterFirstTry, type CallTries } from './acquire-loop';
import type { Acquirer, AcquireEnd, AcquireOutcome, AcquireRequest } from './acquire-request';
import { monotonicNow, newHolderToken, wallAtLastReading } from '../util/clock';
import { LockLostError } from '../errors/errors';
import { FairCall } from './fair-call';
import { HeldLock } from './held-lock';
import { retryPause, unavailableWorthRetrying } from './backoff';
import { raceAbort } from './race-abort';
import { settled } from '../util/settled';
import { withTimeout } from '../util/with-timeout';

/**
 * The shortest life of a fair-mode queue entry without a refresh (ms), however short
 * `commandTimeout` is: a refresh sent every third of it must not have to race the network.
 */
const MIN_WAITER_TTL_MS = 1_000;

/**
 * Fair mode: the waiter queues in Redis under one token for the whole call, and a release hands
 * the lock — or a semaphore's permit — to it directly (a `grant` message) when it is first in line.
 */
export class FairAcquirer implements Acquirer {
  /**
   * How long a waiter's queue entry lives without a refresh, and the longest lease a hand-off
   * gives — so a waiter that died while queued holds up the queue no longer than this. Room for
   * a refresh that takes a whole `commandTimeout`.
   */
  private readonly waiterTtl: number;

  constructor(
    private readonly context: AcquireContext,
    private readonly backend: FairLockBackend,
  ) {
    this.waiterTtl = Math.ceil(Math.max(MIN_WAITER_TTL_MS, 2 * context.options.commandTimeout));
  }

  /**
   * Leaving without the lock — cancelled, out of budget after queueing, Redis out of reach, shut
   * down — the call leaves the queue, and passes on a hand-off (or a late grant of a try it
   * stopped waiting for) so the next in line does not wait for it to lapse. A call answered
   * "busy" at once (`wait` 0) never queued: it has nothing to undo.
   */
  acquire<T>(request: AcquireRequest, report: AcquireEnd<T>): Promise<T> {
    // The first try, as plain mode's: one command, its answer reported and mapped in the step it
    // comes in; only a busy answer with time to wait (or Redis out of reach) goes on to the queue.
    request.signal?.throwIfAborted();
    const { context } = this;
    const { started } = report;
    const keys = context.keysOf(request.key, request.kind);
    if (context.isClosing()) throw new LockServiceClosedError(messages.shuttingDown());
    const down = context.connections.unavailable();
    if (down) throw down;
    const sentAt = monotonicNow();
    // The call's one token names this process, as a plain grant's does: a grant on the first try
    // writes no holder record; a hand-off (later than the token's since) writes one.
    const call = new FairCall(
      newHolderToken(context.options.instanceId, wallAtLastReading()),
      sentAt,
    );
    const sent = this.send(keys, call, request, false);
    const waitFor = (retryAfterMs: number, unavailable?: RedisUnavailableError): Promise<T> => {
      const tries = this.tries(request, keys, call);
      const callTry = new CallTry(context, tries, started + request.wait, unavailable);
      return this.settle(
        keys,
        call,
        request,
        report,
        waitAfterFirstTry(context, request, keys, started, tries, callTry, retryAfterMs),
      );
    };
    const first = (reply: FairAcquireReply): T | Promise<T> => {
      if ('retryAfterMs' in reply) {
        call.busy(sentAt, reply.fence, false);
        if (request.wait <= 0)
          return report.settled({ retryAfterMs: reply.retryAfterMs, waited: 0 });
        return waitFor(reply.retryAfterMs);
      }
      if ('ours' in reply) {
        // Handed to us already (a re-sent try): taken on as a later try would.
        return this.settle(
          keys,
          call,
          request,
          report,
          this.taken(request, keys, call, reply, sentAt),
        );
      }
      let lock: HeldLock;
      try {
        if (context.isClosing()) throw new LockServiceClosedError(messages.shuttingDown());
        lock = context.track(
          this.lockOf(request, keys, call, reply.granted, sentAt, reply.plain),
          request,
        );
      } catch (error) {
        this.leaveQueue(keys, call); // frees it: the call leaves
        return report.failed(error);
      }
      // Outside the try: the call is reported once, and a report that throws releases the lock.
      return report.settled({ lock });
    };
    const firstFailed = (error: unknown): T | Promise<T> => {
      let unavailable: RedisUnavailableError;
      try {
        // Redis out of reach with budget left: try again after a pause. Anything else: thrown.
        unavailable = unavailableWorthRetrying(error, context.connections, started + request.wait);
      } catch (thrown) {
        this.leaveQueue(keys, call); // a grant that may still land is freed by leaving
        return report.failed(thrown);
      }
      return waitFor(retryPause(0), unavailable);
    };
    const subject = (): string => `lock "${request.key}"`;
    if (request.signal) {
      const answer = settled(() =>
        raceAbort(context.bounded(sent, 'acquire', subject), request.signal),
      );
      return answer.then(first, firstFailed);
    }
    return context.bounded(sent, 'acquire', subject, first, firstFailed);
  }

  /**
   * Reports how the call ended once `outcome` — the wait, or taking on a lock handed over —
   * settled, and leaves the queue when it ends without the lock after queueing.
   */
  private settle<T>(
    keys: LockRedisKeys,
    call: FairCall,
    request: AcquireRequest,
    report: AcquireEnd<T>,
    outcome: Promise<AcquireOutcome | HeldLock | number>,
  ): Promise<T> {
    return outcome.then(
      (ended) => {
        if (typeof ended === 'number') {
          // Taking a handed-over lock on failed (lost meanwhile): the waiting loop tries again,
          // or the call answers busy when it has no time to wait.
          if (request.wait <= 0) return report.settled({ retryAfterMs: ended, waited: 0 });
          return this.settle(keys, call, request, report, this.again(request, keys, call, report));
        }
        const result: AcquireOutcome = ended instanceof HeldLock ? { lock: ended } : ended;
        // Out of budget after queueing. (Answered busy at once, `wait` 0, it never queued.)
        if ('retryAfterMs' in result && request.wait > 0) this.leaveQueue(keys, call);
        return report.settled(result);
      },
      (error: unknown) => {
        this.leaveQueue(keys, call);
        return report.failed(error);
      },
    );
  }

  /** The waiting loop, started after a first try whose lock could not be taken on. */
  private again<T>(
    request: AcquireRequest,
    keys: LockRedisKeys,
    call: FairCall,
    report: AcquireEnd<T>,
  ): Promise<AcquireOutcome> {
    const tries = this.tries(request, keys, call);
    const callTry = new CallTry(this.context, tries, report.started + request.wait);
    return waitAfterFirstTry(this.context, request, keys, report.started, tries, callTry, 0);
  }

  private tries(request: AcquireRequest, keys: LockRedisKeys, call: FairCall): CallTries {
    // `writerPriority: false`: a writer that holds nobody back, so it never joins the queue (which
    // holds back new readers and every later writer); it waits for the lock free with no queue.
    const queues = request.writerPriority !== false;
    return {
      attempt: (queue) => this.attempt(request, keys, call, queue && queues),
      token: call.token,
      // A queued waiter refreshes its entry before it lapses.
      maxSleep: Math.min(this.waiterTtl, request.ttl) / 3,
      handOff: {
        take: (waiter) => call.takeGrant(waiter),
        adopt: (fence) => this.handedOver(request, keys, call, fence),
      },
    };
  }

  /** Sends one fair try of `call` (joining the queue if `queue`), as the call's try in flight. */
  private send(
    keys: LockRedisKeys,
    call: FairCall,
    request: AcquireRequest,
    queue: boolean,
  ): Promise<FairAcquireReply> {
    const sent = this.backend.fairAcquire(
      keys,
      call.token,
      Math.ceil(request.ttl),
      queue,
      this.waiterTtl,
      () => !call.left,
    );
    call.inFlight = sent;
    return sent;
  }

  /**
   * A fair-mode try, as the call's token, joining (or staying in) the queue when `queue` is set.
   * A late answer needs no clean-up here: the token stays the call's, so a later try finds a late
   * grant ours, and a call that leaves frees it (`leaveQueue`, after this try).
   */
  private async attempt(
    request: AcquireRequest,
    keys: LockRedisKeys,
    call: FairCall,
    queue: boolean,
  ): Promise<HeldLock | number> {
    const { context } = this;
    const sentAt = monotonicNow();
    const sent = this.send(keys, call, request, queue);
    const reply = await raceAbort(
      context.bounded(sent, 'acquire', `lock "${request.key}"`),
      request.signal,
    );
    if ('retryAfterMs' in reply) {
      call.busy(sentAt, reply.fence, queue);
      return reply.retryAfterMs;
    }
    if (context.isClosing()) throw new LockServiceClosedError(messages.shuttingDown()); // the call leaves
    if ('granted' in reply) {
      const lock = this.lockOf(request, keys, call, reply.granted, sentAt, reply.plain);
      return context.track(lock, request);
    }
    return this.taken(request, keys, call, reply, sentAt);
  }

  /**
   * Already ours: handed over by a release whose message we missed (or a re-sent try). Its lease
   * ends `pttl` after this try ran, which was after we sent it.
   */
  private taken(
    request: AcquireRequest,
    keys: LockRedisKeys,
    call: FairCall,
    reply: { ours: number; pttl: number },
    sentAt: number,
  ): Promise<HeldLock | number> {
    if (this.context.isClosing()) {
      return Promise.reject(new LockServiceClosedError(messages.shuttingDown()));
    }
    const lock = this.lockOf(request, keys, call, reply.ours, sentAt);
    lock.validUntil = sentAt + reply.pttl - this.context.engine.drift(reply.pttl);
    return this.adopt(lock, request);
  }

  /**
   * A release handed us the lock (its `grant` message). It did so after our last busy try ran,
   * with a lease of `min(ttl, entry lifetime)` at the most and no shorter than what is left of
   * that from when that try was sent (`queuedSince`): a sound deadline on our clock.
   */
  private async handedOver(
    request: AcquireRequest,
    keys: LockRedisKeys,
    call: FairCall,
    fence: number,
  ): Promise<HeldLock | number> {
    // The call leaves the queue on its way out, which hands the lock on to the next in line.
    if (this.context.isClosing()) throw new LockServiceClosedError(messages.shuttingDown());
    const lease = Math.min(Math.ceil(request.ttl), this.waiterTtl);
    const lock = this.lockOf(request, keys, call, fence, call.queuedSince);
    lock.validUntil = call.queuedSince + lease - this.context.engine.drift(lease);
    return this.adopt(lock, request);
  }

  /**
   * Takes on a lock handed over with what is left of a short lease, and brings it to the full ttl
   * at once — by the watchdog's next tick, or (`renew: false`) one extension. That extension runs
   * before the lock is tracked: if it fails, no handle is left behind to report a loss of a lock
   * nobody was given (the call retries, or leaves the queue and frees it). Lost meanwhile, or its
   * deadline already behind us: 0, the call tries again at once.
   */
  private async adopt(lock: HeldLock, request: AcquireRequest): Promise<HeldLock | number> {
    const { context } = this;
    // Its deadline passed before we took it on (a stalled process): another may hold it by now.
    // Never handed out: the next try finds it still ours (granted anew) or queues again.
    if (lock.validUntil <= monotonicNow()) return 0;
    if (!request.renew) {
      if (!(await extendUnseen(lock, request.ttl))) return 0;
      // Shutdown began meanwhile and no longer waits for it: the call leaves, which frees it.
      if (context.isClosing()) throw new LockServiceClosedError(messages.shuttingDown());
      return context.track(lock, request);
    }
    context.track(lock, request);
    lock.nextRenewAt = monotonicNow();
    context.engine.rescheduled(lock);
    return lock;
  }

  /**
   * The call's lock, granted with `fence` by a command sent at `startedAt` (`plain`: as default
   * mode grants, see `FairAcquireReply`).
   */
  private lockOf(
    request: AcquireRequest,
    keys: LockRedisKeys,
    call: FairCall,
    fence: number,
    startedAt: number,
    plain = false,
  ): HeldLock {
    const { engine } = this.context;
    const lock = new HeldLock({
      operations: engine,
      key: request.key,
      redisKeys: keys,
      token: call.token,
      fence,
      lease: request.ttl,
      startedAt,
      owner: engine,
    });
    lock.grantedPlain = plain;
    return lock;
  }

  /**
   * Leaves the queue and passes on a hand-off that reached us. Sent once the call's last try has
   * run (bounded): on one connection a later command runs later, except when that try is re-sent
   * (NOSCRIPT, a reconnect) — then it could queue us again after we left.
   */
  private leaveQueue(keys: LockRedisKeys, call: FairCall): void {
    call.left = true;
    const afterLastTry = withTimeout(
      call.inFlight ?? Promise.resolve(),
      this.context.options.commandTimeout,
      'acquire',
    ).catch(() => undefined);
    this.context.cleanUp(
      afterLastTry.then(() => this.backend.fairRelease(keys, call.token)),
      'Leaving a fair queue',
    );
  }
}

/**
 * Fair mode, `renew: false`: brings a lock handed over with a short lease to its full `ttl` by one
 * extension, before anyone has its handle. A loss meanwhile (that lease ran out, the key is not
 * ours) is the acquire call's business, not an event about a lock nobody was given: it resolves
 * false, and the call tries again (a lock that may still be ours was released by the loss).
 */
async function extendUnseen(lock: HeldLock, ttl: number): Promise<boolean> {
  lock.unseen = true;
  try {
    await lock.extend(ttl);
    return true;
  } catch (error) {
    if (error instanceof LockLostError) return false;
    throw error;
  } finally {
    lock.unseen = false;
  }
}
