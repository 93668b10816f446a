/**
 * `start()`, with a synchronous throw turned into a rejection, as an async function would: for
 * the hot paths written as plain promise chains (an async function costs promise layers), whose
 * callers expect a rejection and never a throw.
 */
export function settled<T>(start: () => Promise<T>): Promise<T> {
  try {
    return start();
  } catch (error) {
    return Promise.reject(error);
  }
}
