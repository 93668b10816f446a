/** How the watchdog's renewals have gone lately: what a health check reads. All times monotonic ms. */
export interface RenewalStatus {
  /** Whether a tick is scheduled (or a batch is in flight) whenever locks are watched. */
  readonly running: boolean;
  /** How late the last tick ran after its timer's time. */
  readonly lastTickLate: number;
  /** When the last tick ran, or undefined before the first one. */
  readonly lastTickAt?: number;
  /** How far past its time the next tick is now (0 when not yet due or none is scheduled). */
  readonly overdue: number;
  /** When a renewal batch last succeeded, or undefined before the first one. */
  readonly lastRenewedAt?: number;
  /** When each recent batch failed, oldest first (at most the last `MAX_FAILURES_KEPT`). */
  readonly failedAt: readonly number[];
  /** Batches failed in a row since the last one that succeeded. */
  readonly failedInRow: number;
  /** What the last failure said, without lock names. */
  readonly lastFailure?: string;
}

/** A health check asks about the last minute or so: a bounded memory of failures is enough. */
export const MAX_FAILURES_KEPT = 256;

/**
 * The watchdog's running tally of ticks and batch outcomes. Cheap to keep (a few numbers per tick
 * and per batch) and read only by a health check.
 */
export class RenewalRecord {
  private lastTickLate = 0;
  private lastTickAt?: number;
  private lastRenewedAt?: number;
  private readonly failedAt: number[] = [];
  private failedInRow = 0;
  private lastFailure?: string;

  /** A tick ran at `now`, `late` ms after its timer's time. */
  ticked(now: number, late: number): void {
    this.lastTickAt = now;
    this.lastTickLate = Math.max(0, late);
  }

  succeeded(now: number): void {
    this.lastRenewedAt = now;
    this.failedInRow = 0;
  }

  failed(now: number, reason: string): void {
    this.failedAt.push(now);
    if (this.failedAt.length > MAX_FAILURES_KEPT) this.failedAt.shift();
    this.failedInRow += 1;
    this.lastFailure = reason;
  }

  /** The tally, with how the loop stands now (from the watchdog: its timer and its batches). */
  status(running: boolean, overdue: number): RenewalStatus {
    return {
      running,
      lastTickLate: this.lastTickLate,
      lastTickAt: this.lastTickAt,
      overdue: Math.max(0, overdue),
      lastRenewedAt: this.lastRenewedAt,
      failedAt: [...this.failedAt],
      failedInRow: this.failedInRow,
      lastFailure: this.lastFailure,
    };
  }
}
