import { traitsOf } from '../keys/lease-kind';
import type { LockRedisKeys } from '../keys/lock-keys';
import { LockServiceClosedError, RedisUnavailableError } from '../errors/errors';
import { messages } from '../errors/messages';
import type { AcquireContext } from './acquire-context';
import type { AcquireOutcome, AcquireRequest } from './acquire-request';
import { retryPause, unavailableWorthRetrying } from './backoff';
import { monotonicNow } from '../util/clock';
import { settled } from '../util/settled';
import type { HeldLock } from './held-lock';
import type { Waiter } from './waiter';

/** How one acquire call tries for its lock; `waitForLock` decides when. */
export interface CallTries {
  /**
   * One try: the lock, or the ms until another try is worth it (the holder's remaining lease).
   * Fair mode joins (or stays in) the queue when `queue` is set.
   */
  attempt(queue: boolean): Promise<HeldLock | number>;
  /** Fair mode: the call's token, to which a release addresses its hand-off. */
  readonly token?: string;
  /** The longest sleep between tries (fair mode: a queue entry is refreshed before it lapses). */
  readonly maxSleep: number;
  /**
   * Fair mode: a release hands the lock to the first in line directly. Absent in plain mode,
   * where a release wakes one waiter to try again.
   */
  readonly handOff?: HandOff;
  /**
   * Called when the call gives up after waiting (out of budget, cancelled, failed): a waiting
   * writer's entry leaves at once. Never after the first try alone, which enters nothing.
   */
  gaveUp?(): void;
}

/** Fair mode: how a call takes on a lock a release handed to it. */
export interface HandOff {
  /** The fence of a hand-off to this call that `waiter` heard of since the last look, if any. */
  take(waiter: Waiter): number | undefined;
  /** Takes on the lock handed over with `fence`: the lock, or 0 to try again at once. */
  adopt(fence: number): Promise<HeldLock | number>;
}

/** The tries of one acquire call, and how the last of them failed to reach Redis (if it did). */
export class CallTry {
  private failures: number;

  constructor(
    private readonly context: AcquireContext,
    private readonly tries: CallTries,
    readonly deadline: number,
    /** Redis out of reach at the last try (cleared by a try that reached it). */
    public unavailable?: RedisUnavailableError,
  ) {
    this.failures = unavailable ? 1 : 0;
  }

  /** One try of the call, unless shutdown has begun or the connections cannot work. */
  attempt(queue: boolean): Promise<HeldLock | number> {
    return this.once(() => attemptIfOpen(this.context, this.tries, queue));
  }

  /** One try; Redis out of reach counts as busy for a backoff pause while the budget lasts. */
  once(step: () => Promise<HeldLock | number>): Promise<HeldLock | number> {
    return settled(step).then(
      (outcome) => {
        this.unavailable = undefined;
        return outcome;
      },
      (error: unknown) => this.failed(error),
    );
  }

  /** A try that failed: rethrown, or (Redis out of reach, budget left) the pause until the next. */
  failed(error: unknown): number {
    this.unavailable = unavailableWorthRetrying(error, this.context.connections, this.deadline);
    return retryPause(this.failures++);
  }
}

/**
 * The wait after a busy first try (each acquirer makes its first try itself, in one step), `first`
 * ms being how long the holder's lease still runs: waits for a release message or the holder's
 * lease end, trying again each time. Redis being out of reach (a failover, a restart) is retried
 * with backoff while the budget lasts; if it still is when the budget runs out, that error is
 * thrown rather than "busy". `started` is when the call began (monotonic): the budget counts
 * from it.
 */
export async function waitAfterFirstTry(
  context: AcquireContext,
  request: AcquireRequest,
  keys: LockRedisKeys,
  started: number,
  tries: CallTries,
  call: CallTry,
  first: number,
): Promise<AcquireOutcome> {
  const { signal } = request;
  const { notifier, options } = context;
  const { deadline } = call;
  context.waiting(1);
  let waiter: Waiter;
  try {
    // Subscribe before the next try, so a release between our try and our sleep is never missed.
    waiter = await notifier.register(
      keys.channel,
      Math.min(options.commandTimeout, Math.max(0, deadline - monotonicNow())),
      signal,
      tries.token,
      traitsOf(keys.kind).wakesAll,
    );
  } catch (error) {
    context.waiting(-1);
    tries.gaveUp?.();
    throw error;
  }
  const { handOff } = tries;
  try {
    let retryAfterMs = first;
    for (;;) {
      const outcome = await call.attempt(true);
      if (typeof outcome !== 'number') {
        passOnUnused(notifier, waiter, keys, handOff);
        return { lock: outcome };
      }
      retryAfterMs = outcome;
      let granted = handOff?.take(waiter);
      if (granted === undefined) {
        const remaining = deadline - monotonicNow();
        if (remaining <= 0) {
          if (call.unavailable) throw call.unavailable;
          tries.gaveUp?.();
          return { retryAfterMs, waited: monotonicNow() - started };
        }
        // Fallback when no message comes (expiry, lost message): the holder's lease end + jitter.
        const jitter = Math.random() * options.retryJitter;
        await waiter.sleep(Math.min(retryAfterMs + jitter, remaining, tries.maxSleep), signal);
        granted = handOff?.take(waiter);
      }
      if (handOff && granted !== undefined) {
        // Redis out of reach while taking it on: the next try finds the lock ours and takes
        // it on again; a call that gives up leaves the queue, which frees it.
        const fence = granted;
        const adopted = await call.once(() => handOff.adopt(fence));
        if (typeof adopted !== 'number') return { lock: adopted };
      }
    }
  } catch (error) {
    // Leaving without the lock (cancelled, Redis out of reach): a wake-up this waiter may have
    // taken is passed on, so the others do not sleep until their fallback while it is free.
    // (Fair mode passes nothing on here: leaving the queue hands the lock on in Redis.)
    notifier.unregister(waiter);
    if (!handOff) notifier.passOn(keys.channel);
    tries.gaveUp?.();
    throw error;
  } finally {
    notifier.unregister(waiter);
    context.waiting(-1);
  }
}

/**
 * A call that got its lock may hold a wake-up that arrived during its try: from another release.
 * Only one holder fits a mutex, but a semaphore's (or readers') other places may be free, so that
 * wake-up goes to the next waiter instead of dying with this one (it would sleep to its fallback).
 * When it was the news of the very place this call took, the next waiter spends one busy try.
 */
function passOnUnused(
  notifier: AcquireContext['notifier'],
  waiter: Waiter,
  keys: LockRedisKeys,
  handOff: HandOff | undefined,
): void {
  if (handOff || traitsOf(keys.kind).oneHolder || !waiter.takePendingWake()) return;
  notifier.unregister(waiter); // not this waiter again
  notifier.passOn(keys.channel);
}

/**
 * A try, unless shutdown has begun or the connections cannot work: then that is thrown, with
 * nothing sent (so not even queued: no late grant to undo).
 */
function attemptIfOpen(
  context: AcquireContext,
  tries: CallTries,
  queue: boolean,
): Promise<HeldLock | number> {
  if (context.isClosing()) throw new LockServiceClosedError(messages.shuttingDown());
  const down = context.connections.unavailable();
  if (down) throw down;
  return tries.attempt(queue);
}
