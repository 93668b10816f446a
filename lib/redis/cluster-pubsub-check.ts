import type { Cluster } from 'ioredis';
import { detectClusterPubSubMode, publishCommand, type PubSubMode } from './pubsub-mode';

/** Backoff of the check's retries: from this, doubling, up to `MAX_RETRY_DELAY`. */
const FIRST_RETRY_DELAY = 250;
const MAX_RETRY_DELAY = 5_000;

/**
 * A Cluster's pub/sub mode, asked of its nodes when the backend starts. Until they answered,
 * releases publish with `PUBLISH`, which every server has: a release never waits for (or fails
 * on) the check. When no node answers (the Cluster is unreachable as the app starts), it is asked
 * again with backoff until one does — not only when this process subscribes: a process that only
 * takes and releases locks must also come to publish as the others subscribe, or their waiters
 * would sleep until the holder's lease ends.
 */
export class ClusterPubSubCheck {
  /** The command releases publish with now. */
  publish: 'PUBLISH' | 'SPUBLISH' = 'PUBLISH';
  private mode?: PubSubMode;
  private detecting?: Promise<PubSubMode>;
  private retry?: NodeJS.Timeout;
  private failures = 0;
  private closed = false;

  constructor(
    private readonly cluster: Cluster,
    /** Bound (ms) on each node's answer. */
    private readonly timeout: number,
  ) {
    this.modeNow().catch(() => undefined);
  }

  /** The mode, asking the nodes now when no answer came yet (rejects when none answers). */
  modeNow(): Promise<PubSubMode> {
    if (this.mode) return Promise.resolve(this.mode);
    this.detecting ??= detectClusterPubSubMode(this.cluster, this.timeout).then(
      (mode) => {
        this.mode = mode;
        this.publish = publishCommand(mode);
        clearTimeout(this.retry);
        return mode;
      },
      (error: unknown) => {
        this.detecting = undefined;
        this.retryLater();
        throw error;
      },
    );
    return this.detecting;
  }

  /** Stops retrying (the backend closes). */
  close(): void {
    this.closed = true;
    clearTimeout(this.retry);
  }

  private retryLater(): void {
    if (this.closed || this.retry) return;
    const delay = Math.min(FIRST_RETRY_DELAY * 2 ** this.failures++, MAX_RETRY_DELAY);
    this.retry = setTimeout(() => {
      this.retry = undefined;
      if (!this.closed) this.modeNow().catch(() => undefined);
    }, delay);
    // A check still unanswered must not keep the process alive.
    this.retry.unref();
  }
}
