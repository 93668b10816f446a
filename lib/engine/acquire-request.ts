import type { LeaseKind } from '../keys/lease-kind';
import type { HeldLock } from './held-lock';

/** One acquisition request, validated by the caller. */
export interface AcquireRequest {
  key: string;
  ttl: number;
  wait: number;
  /** Longest hold in ms from when the granting command was sent (`Infinity`: no bound). */
  maxHold: number;
  /**
   * Shortest hold in ms from when the granting command was sent: a release before it keeps the
   * key until then (absent or 0: none). Never above `maxHold`.
   */
  minHold?: number;
  renew: boolean;
  signal?: AbortSignal;
  /** What the lease grants (default: the key alone, a mutex). */
  kind?: LeaseKind;
  /**
   * A writer (exclusive lease) that waits for a read-write lock's readers holds back new readers
   * meanwhile (default true).
   */
  writerPriority?: boolean;
}

/** Either a held lock, or how long the current holder's lease still runs (ms, Redis' clock). */
export type AcquireOutcome = { lock: HeldLock } | { retryAfterMs: number; waited: number };

/**
 * How an acquirer ends its call (the engine's report of it, `AcquireReport`): exactly one of
 * `settled` and `failed`, in the step the call ends in.
 */
export interface AcquireEnd<T> {
  /** When the call began (monotonic): its wait budget counts from here. */
  readonly started: number;
  /** The outcome; resolves what the caller makes of it (which may throw: busy, say). */
  settled(outcome: AcquireOutcome): T;
  /** The call failed: reported, and thrown. */
  failed(error: unknown): never;
}

/**
 * How acquire calls try and wait: plainly, or in a fair-mode queue. The call ends through
 * `report` — its outcome or its failure, reported once in the step it comes in — and resolves
 * what `report.settled` answers.
 */
export interface Acquirer {
  acquire<T>(request: AcquireRequest, report: AcquireEnd<T>): Promise<T>;
}
