/*
 * What the engine holds of a span: no OpenTelemetry type here, so the engine's declarations do not
 * name the optional peer.
 */

/** A span around some work: the work runs with it as the active span. */
export interface SpanScope {
  run<T>(fn: () => T): T;
}

/** The `lock.acquire` span of one acquire call. */
export interface AcquireSpan extends SpanScope {
  acquired(fence: number): void;
  busy(retryAfterMs: number): void;
  failed(error: unknown): void;
}

/** The `lock.hold` span around the work of a locked section (`withLock`, `@Locked`). */
export interface HoldSpan extends SpanScope {
  /** Ends it: `thrown` is what the work threw, if it did; `lost` the reason, if the lock was lost. */
  end(thrown: { error: unknown } | undefined, lost: string | undefined): void;
}
