import type { LeaderRevokedReason, LockLostError } from '../errors/errors';
import type { LockMode } from '../telemetry/lock-mode';
import type { LockHandle } from './lock-handle';

/** `'acquired'`: an acquire call got its lock. */
export interface LockAcquiredEvent {
  /** The lock key as the caller named it (without the prefix). */
  readonly key: string;
  /** The fencing token of the grant. */
  readonly fence: number;
  /** How long (ms) the call took, waiting included: from the call to the grant. */
  readonly waitedMs: number;
  readonly mode: LockMode;
}

/** `'busy'`: an acquire call gave up, the lock still held by another after its `wait` budget. */
export interface LockBusyEvent {
  readonly key: string;
  /** How long (ms) the call waited before it gave up (0 for a call that did not wait). */
  readonly waitedMs: number;
  /** The holder's remaining lease (ms) at the last try: when another try is worth it. */
  readonly retryAfterMs: number;
  readonly mode: LockMode;
}

/** `'released'`: a held lock was released while still ours. */
export interface LockReleasedEvent {
  readonly key: string;
  readonly fence: number;
  /** How long (ms) the lock was held: from when its granting command was sent to the release. */
  readonly heldMs: number;
  readonly mode: LockMode;
}

/**
 * `'renewal-failed'`: a renewal command of the watchdog failed (Redis out of reach, a timeout).
 * It is retried until the locks' deadlines; a `'lost'` event follows if none succeeds in time.
 */
export interface LockRenewalFailedEvent {
  /** The keys of the locks that renewal was for. */
  readonly keys: readonly string[];
  /** Why it failed. */
  readonly error: unknown;
}

/** `'elected'`: this replica became the leader of a role (`LockService.lead`, `@WhenLeader`). */
export interface LeaderElectedEvent {
  readonly role: string;
  /** The term: the lease's fence, strictly increasing per role. */
  readonly term: number;
  /** How long (ms) this campaign waited for the role, from its start or its last term's end. */
  readonly waitedMs: number;
}

/** `'revoked'`: a term of this replica's leadership ended; its signal aborted first. */
export interface LeaderRevokedEvent {
  readonly role: string;
  readonly term: number;
  /** Why: the lease's loss (`LockLostReason`), or `'resigned'`. */
  readonly reason: LeaderRevokedReason;
  /** How long (ms) the term lasted. */
  readonly heldMs: number;
}

/**
 * The events of `LockService.on()`, each with its listener's arguments. `'lost'` keeps its
 * two-argument form: the loss (its `reason` says why) and the handle its work was given.
 */
export interface LockEvents {
  acquired: [event: LockAcquiredEvent];
  busy: [event: LockBusyEvent];
  released: [event: LockReleasedEvent];
  lost: [error: LockLostError, lock: LockHandle];
  'renewal-failed': [event: LockRenewalFailedEvent];
  elected: [event: LeaderElectedEvent];
  revoked: [event: LeaderRevokedEvent];
}

/** The name of an event of `LockEvents`. */
export type LockEventName = keyof LockEvents;

/**
 * A listener of one event. What it returns is ignored, except that it may be async: a rejection
 * of the promise it returns is logged like a throw, never left unhandled.
 */
export type LockEventListener<E extends LockEventName> = (...args: LockEvents[E]) => unknown;

/**
 * Listener of the `'lost'` event. What it returns is ignored, except that it may be async: a
 * rejection of the promise it returns is logged like a throw, never left unhandled.
 */
export type LockLostListener = LockEventListener<'lost'>;
