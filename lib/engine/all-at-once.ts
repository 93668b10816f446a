import type { AcquireAllReply, LockBackend } from '../backends/lock-backend';
import { LockServiceClosedError, RedisUnavailableError } from '../errors/errors';
import { messages } from '../errors/messages';
import type { LockRedisKeys } from '../keys/lock-keys';
import { monotonicNow, newHolderToken, wallAtLastReading } from '../util/clock';
import { settled } from '../util/settled';
import type { AcquireContext } from './acquire-context';
import { retryPause, unavailableWorthRetrying } from './backoff';
import { HeldLock } from './held-lock';
import type { MultiAcquireOutcome, MultiAcquireRequest } from './multi-acquire-request';
import { MultiLock } from './multi-lock';
import { raceAbort } from './race-abort';

/** One key of a multi-key call: its name as given, and its Redis names. */
export interface KeyEntry {
  readonly key: string;
  readonly redisKeys: LockRedisKeys;
}

type Busy = Extract<AcquireAllReply, { busy: number }>;

/** The backend commands an all-at-once call sends. */
export interface AllAtOnceCommands {
  acquireAll: NonNullable<LockBackend['acquireAll']>;
  release: LockBackend['release'];
}

/**
 * Takes every key in one atomic step per try (one script on one server): never a part. When one
 * is busy, waits for it (`waitForAll`) and tries all again.
 */
export function acquireAllAtOnce(
  context: AcquireContext,
  backend: AllAtOnceCommands,
  request: MultiAcquireRequest,
  entries: readonly KeyEntry[],
  started: number,
): Promise<MultiAcquireOutcome> {
  // The first try is the one most calls end with: answered in one step, the wait begun only when
  // a key is busy (or Redis out of reach) and there is time to wait.
  const first = (outcome: MultiLock | Busy): MultiAcquireOutcome | Promise<MultiAcquireOutcome> => {
    if (outcome instanceof MultiLock) return { lock: outcome };
    if (request.wait <= 0) return busyOutcome(entries, outcome, started);
    return waitForAll(context, backend, request, entries, started, outcome);
  };
  const failed = (error: unknown): Promise<MultiAcquireOutcome> => {
    const unavailable = unavailableWorthRetrying(
      error,
      context.connections,
      started + request.wait,
    );
    return waitForAll(context, backend, request, entries, started, {
      busy: 0,
      retryAfterMs: retryPause(0),
      unavailable,
    });
  };
  return tryAll(context, backend, request, entries, first, failed);
}

/** A busy try, and (Redis out of reach) why it could not tell. */
type BusyTry = Busy & { unavailable?: RedisUnavailableError };

/** The outcome of a call that gives up on `busy`: what was busy, and since when it waited. */
function busyOutcome(
  entries: readonly KeyEntry[],
  busy: BusyTry,
  started: number,
): MultiAcquireOutcome {
  if (busy.unavailable) throw busy.unavailable;
  const waited = monotonicNow() - started;
  const keys = entries.map((entry) => entry.key);
  return { retryAfterMs: busy.retryAfterMs, waited, busyKey: entries[busy.busy]!.key, keys };
}

/**
 * Waits on the busy key's release messages (subscribed before the next try, so a release in
 * between is not missed) or its holder's lease end, and tries all again; Redis out of reach is
 * retried with backoff while the budget lasts, as a single-key call does.
 */
async function waitForAll(
  context: AcquireContext,
  backend: AllAtOnceCommands,
  request: MultiAcquireRequest,
  entries: readonly KeyEntry[],
  started: number,
  firstBusy: BusyTry,
): Promise<MultiAcquireOutcome> {
  const { notifier, options } = context;
  const { signal } = request;
  const deadline = started + request.wait;
  let failures = firstBusy.unavailable ? 1 : 0;
  let unavailable = firstBusy.unavailable;
  const attempt = (): Promise<MultiLock | BusyTry> =>
    tryAll(
      context,
      backend,
      request,
      entries,
      (outcome) => {
        unavailable = undefined;
        return outcome;
      },
      (error) => {
        unavailable = unavailableWorthRetrying(error, context.connections, deadline);
        return { busy: 0, retryAfterMs: retryPause(failures++) };
      },
    );
  let outcome: MultiLock | BusyTry = firstBusy;
  if (request.wait <= 0) return busyOutcome(entries, firstBusy, started);
  context.waiting(1);
  try {
    // A sleep ends at the deadline at the latest; the try after it is the call's last (as for a
    // single key): a key freed without a release message is still found free then.
    for (;;) {
      const { channel } = entries[outcome.busy]!.redisKeys;
      const timeout = Math.min(options.commandTimeout, Math.max(0, deadline - monotonicNow()));
      const waiter = await notifier.register(channel, timeout, signal);
      // Set when this call stops waiting on `channel` without taking its key.
      let leaving = true;
      let remaining = 0;
      try {
        outcome = await attempt();
        if (outcome instanceof MultiLock) {
          leaving = false;
          return { lock: outcome };
        }
        remaining = deadline - monotonicNow();
        // Another key busy now: subscribe to that one before sleeping.
        if (remaining > 0 && entries[outcome.busy]!.redisKeys.channel === channel) {
          const jitter = Math.random() * options.retryJitter;
          await waiter.sleep(Math.min(outcome.retryAfterMs + jitter, remaining), signal);
          leaving = false;
        }
      } finally {
        notifier.unregister(waiter);
        // A release wakes one waiter per process. The wake-up for this key that led here (or
        // arrived during the try) goes to another waiter, or it sleeps to its fallback while the
        // key is free: this call is leaving the key (another is busy, the budget is spent, an
        // error). One spurious pass-on costs the next waiter one busy try.
        if (leaving) notifier.passOn(channel);
      }
      if (remaining <= 0) return busyOutcome(entries, { ...outcome, unavailable }, started);
    }
  } finally {
    context.waiting(-1);
  }
}

/**
 * One try for all of them, as `PlainAcquirer`'s try is for one (late grants undone, too): its
 * answer — the set, or which key is busy — mapped by `then` in the step it comes in, a failure
 * by `failed`.
 */
function tryAll<R>(
  context: AcquireContext,
  backend: AllAtOnceCommands,
  request: MultiAcquireRequest,
  entries: readonly KeyEntry[],
  then: (outcome: MultiLock | Busy) => R | PromiseLike<R>,
  failed: (error: unknown) => R | PromiseLike<R>,
): Promise<R> {
  if (context.isClosing()) throw new LockServiceClosedError(messages.shuttingDown());
  request.signal?.throwIfAborted(); // before the send: nothing to free
  const down = context.connections.unavailable();
  if (down) throw down;
  const keys = entries.map((entry) => entry.redisKeys);
  const sentAt = monotonicNow();
  const since = wallAtLastReading();
  const tokens = entries.map(() => newHolderToken(context.options.instanceId, since));
  const releaseAll = () => Promise.all(keys.map((k, i) => backend.release(k, tokens[i]!)));
  const sent = backend.acquireAll(keys, tokens, Math.ceil(request.ttl));
  const granted = (reply: AcquireAllReply): R | PromiseLike<R> => {
    if ('busy' in reply) return then(reply);
    if (context.isClosing()) {
      context.cleanUp(releaseAll());
      throw new LockServiceClosedError(messages.shuttingDown());
    }
    const parts = entries.map((entry, i) => {
      const lock = new HeldLock({
        operations: context.engine,
        key: entry.key,
        redisKeys: entry.redisKeys,
        token: tokens[i]!,
        fence: reply.fences[i]!,
        lease: request.ttl,
        startedAt: sentAt,
        owner: context.engine,
      });
      return context.track(lock, request);
    });
    return then(new MultiLock(parts as [HeldLock, ...HeldLock[]]));
  };
  const lost = (error: unknown): R | PromiseLike<R> => {
    // Timed out or cancelled while the server may still grant them: free that grant when it lands.
    context.cleanUp(sent.then((late): unknown => ('fences' in late ? releaseAll() : false)));
    return failed(error);
  };
  const subject = (): string => messages.lockNames(entries);
  if (request.signal) {
    // settled(): a signal that aborted in the send's step rejects here, and `lost` frees the grant.
    const { signal } = request;
    const answer = settled(() => raceAbort(context.bounded(sent, 'acquire', subject), signal));
    return answer.then(granted, lost);
  }
  return context.bounded(sent, 'acquire', subject, granted, lost);
}
