import type { RenewalStatus } from '../engine/renewal-record';
import type { ResolvedLockHealthOptions } from './lock-health-options';
import type { PingOutcome } from './ping-connections';

/**
 * What the lock health check reports, under its key, besides terminus' `status`. (A type, not an
 * interface: terminus takes details as a string-keyed record.)
 */
export type LockHealthDetails = {
  /** The Redis servers the locks live on, PINGed through the library's connections. */
  redis: {
    reachable: boolean;
    /** The slowest PING answer, in ms; absent when none answered. */
    latencyMs?: number;
    /** With several servers (Cluster primaries, Redlock nodes): how many answered of how many. */
    nodes?: { answered: number; total: number; needed: number };
    error?: string;
  };
  /** The watchdog, which renews every held lock. */
  renewals: {
    /** Whether the loop is scheduled while locks are held (false is a bug: please report it). */
    running: boolean;
    /** How late the loop runs, in ms: its last recent tick's delay, or how overdue it is now. */
    lagMs: number;
    /** Renewal batches that failed within `window`. */
    recentFailures: number;
    /** Batches failed in a row, with no success since. */
    failingInRow: number;
    /** The last failure's message (no lock names) and how long ago it was, in ms. */
    lastFailure?: string;
    lastFailureAgoMs?: number;
    /** How long ago a renewal batch last succeeded, in ms. */
    lastRenewalAgoMs?: number;
  };
  /** Locks this instance holds now. */
  held: number;
  /** Why the check is down; absent when up. */
  reasons?: string[];
};

/** The engine's side of the check: held locks and renewals, as `LockEngine.health()` gives them. */
export interface EngineHealth {
  held: number;
  renewals: RenewalStatus;
}

/**
 * Judges one check: the details to report, and the reasons it is down (none when up). Down when
 * the locks cannot be kept: Redis out of reach, the loop not running or lagging past `maxLag`, or
 * `maxFailedRenewals` batches failed in a row recently while locks are held (with none held,
 * failures no longer put anything at risk).
 */
export function judgeLockHealth(
  ping: PingOutcome,
  engine: EngineHealth,
  limits: ResolvedLockHealthOptions,
  now: number,
): LockHealthDetails {
  const { renewals } = engine;
  const recent = (at: number | undefined): at is number =>
    at !== undefined && now - at <= limits.window;
  const lastFailedAt = renewals.failedAt[renewals.failedAt.length - 1];
  const tickLag = recent(renewals.lastTickAt) ? renewals.lastTickLate : 0;
  const lagMs = round(Math.max(tickLag, renewals.overdue));
  const details: LockHealthDetails = {
    redis: {
      reachable: ping.reachable,
      ...(ping.latencyMs !== undefined && { latencyMs: ping.latencyMs }),
      ...(ping.nodes > 1 && {
        nodes: { answered: ping.answered, total: ping.nodes, needed: ping.needed },
      }),
      ...(ping.error !== undefined && { error: ping.error }),
    },
    renewals: {
      running: renewals.running,
      lagMs,
      recentFailures: renewals.failedAt.filter(recent).length,
      failingInRow: renewals.failedInRow,
      ...(renewals.lastFailure !== undefined &&
        lastFailedAt !== undefined && {
          lastFailure: renewals.lastFailure,
          lastFailureAgoMs: round(now - lastFailedAt),
        }),
      ...(renewals.lastRenewedAt !== undefined && {
        lastRenewalAgoMs: round(now - renewals.lastRenewedAt),
      }),
    },
    held: engine.held,
  };
  const reasons: string[] = [];
  if (!ping.reachable) {
    const of =
      ping.nodes > 1 ? ` (${ping.answered} of ${ping.nodes} answered, ${ping.needed} needed)` : '';
    reasons.push(`Redis is unreachable${of}: ${ping.error ?? 'no answer'}`);
  }
  if (!renewals.running) reasons.push('The renewal loop is not scheduled while locks are held.');
  if (lagMs > limits.maxLag) {
    reasons.push(`The renewal loop runs ${lagMs} ms late (maxLag ${limits.maxLag} ms).`);
  }
  // Failed renewals put held locks at risk: with none held (the locks were lost or released),
  // they are history, and the check is up as soon as Redis answers again.
  const atRisk = engine.held > 0;
  if (atRisk && renewals.failedInRow >= limits.maxFailedRenewals && recent(lastFailedAt)) {
    reasons.push(
      `The last ${renewals.failedInRow} renewal batch(es) failed: ${renewals.lastFailure ?? ''}`,
    );
  }
  if (reasons.length > 0) details.reasons = reasons;
  return details;
}

const round = (ms: number): number => Math.round(ms);
