/**
 * One locked call as its lock sees it: the work for the key that outlives the stream the lock is
 * held for — the handler's promise (a timeout interceptor may unsubscribe before it settles), a
 * response still being written, a stream still being read, an acknowledgement not yet sent. The
 * lock is released only once all of it has settled, so that work never runs unprotected.
 */
export class LockedCall {
  private readonly pending = new Set<Promise<void>>();
  private closed = false;

  /** The WebSocket client of a gateway call, so a pending acknowledgement ends when it leaves. */
  client?: unknown;

  /** False once the lock was released: a handler reached only now must not run. */
  get open(): boolean {
    return !this.closed;
  }

  /** True while some held work has not settled. */
  get busy(): boolean {
    return this.pending.size > 0;
  }

  /** Keeps the lock until `work` settles (fulfilled or rejected: either way it is over). */
  hold(work: PromiseLike<unknown>): void {
    // Forgotten in the first reaction to `work`, so code that reacts to it later (the stream that
    // carries a handler's result) already sees the call idle.
    const forget = (): void => void this.pending.delete(settled);
    const settled: Promise<void> = Promise.resolve(work).then(forget, forget);
    this.pending.add(settled);
  }

  /** Resolves once every held work has settled, then closes the call. Never rejects. */
  async drain(): Promise<void> {
    while (this.pending.size > 0) await Promise.all(this.pending);
    this.closed = true;
  }

  /** Closes a call that holds no work (`busy` is false), as `drain()` would. */
  close(): void {
    this.closed = true;
  }
}
