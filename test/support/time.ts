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
