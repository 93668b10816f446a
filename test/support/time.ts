import { performance } from 'node:perf_hooks';

export const sleep = (ms: number): Promise<void> =>
  new Promise((resolve) => setTimeout(resolve, ms));

/** Monotonic ms, the clock the library keeps its deadlines on. */
export const now = (): number => performance.now();

/** Polls `condition` every `every` ms until it holds; rejects after `timeout` ms. */
export async function waitFor(
  condition: () => boolean | Promise<boolean>,
  timeout = 5_000,
  every = 10,
): Promise<void> {
  const deadline = now() + timeout;
  while (!(await condition())) {
    if (now() > deadline) throw new Error(`Condition not met within ${timeout} ms: ${condition}`);
    await sleep(every);
  }
}

/**
 * A promise the test opens when it chooses: a locked handler awaits `gate.opened` so it holds
 * its lock until the test has seen what it waits for (e.g. the refusals of concurrent callers),
 * instead of for a fixed sleep that a stalled event loop can outlast.
 *
 * `release()` re-arms the gate, so a handler must read `opened` in the same synchronous step as
 * the signal the test releases on (a counter, a pushed event), before any `await`: a handler that
 * signals, awaits something, then reads `opened` can read it after the test saw the signal and
 * released, and then waits for a release that never comes (the GraphQL resolver spec hung so).
 * The gate cannot tell such a late reader from one meant for the next release, which is why the
 * rule sits with the handler.
 */
export class Gate {
  private open!: () => void;
  opened = this.arm();

  /** Opens the gate, and arms a fresh one for the next use. */
  release(): void {
    this.open();
    this.opened = this.arm();
  }

  private arm(): Promise<void> {
    return new Promise<void>((resolve) => (this.open = resolve));
  }
}
