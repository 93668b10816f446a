/**
 * Acquire calls in progress, which close() waits for before it closes the connection. A count,
 * not a set of promises: each call is counted in the `.then` its lifecycle report runs anyway,
 * with no promise of its own on the acquire path.
 */
export class CallsInProgress {
  private count = 0;
  private idle?: { done: Promise<void>; resolve: () => void };

  /** A call started; `end` must follow once it has settled, however it ended. */
  begin(): void {
    this.count++;
  }

  /** A call counted by `begin` settled (an arrow: passed on as it is, never bound per call). */
  readonly end = (): void => {
    if (--this.count > 0 || !this.idle) return;
    this.idle.resolve();
    this.idle = undefined;
  };

  /** Counts `call` among the acquire calls in progress (close() waits for them). */
  counted<T>(call: Promise<T>): Promise<T> {
    this.begin();
    call.then(this.end, this.end);
    return call;
  }

  /**
   * Settles once no call is in progress. Shutdown refuses new calls first, so this waits for those
   * under way when it began (and for any refused meanwhile, which end at once).
   */
  settled(): Promise<void> {
    if (this.count === 0) return Promise.resolve();
    if (!this.idle) {
      let resolve!: () => void;
      const done = new Promise<void>((r) => (resolve = r));
      this.idle = { done, resolve };
    }
    return this.idle.done;
  }
}
