/** Acquire calls in progress, which close() waits for before it closes the connection. */
export class CallsInProgress {
  private readonly calls = new Set<Promise<unknown>>();

  /** Counts `call` among the acquire calls in progress (close() waits for them). */
  counted<T>(call: Promise<T>): Promise<T> {
    this.calls.add(call);
    const forget = (): void => void this.calls.delete(call);
    call.then(forget, forget);
    return call;
  }

  /** Settles once every call counted now has settled, however it ended. */
  settled(): Promise<PromiseSettledResult<unknown>[]> {
    return Promise.allSettled([...this.calls]);
  }
}
