/**
 * Error replies that say "not now" rather than "never": a failover or restart in progress, a
 * busy script, a cluster re-shard. Lock commands that meet them are retried within the `wait`
 * budget, like a dropped connection; any other error reply is final.
 */
const TRANSIENT_CODES = new Set([
  'READONLY', // wrote to a replica: a failover just happened, the client will reconnect
  'LOADING', // restarting, loading the dataset
  'MASTERDOWN',
  'CLUSTERDOWN',
  'TRYAGAIN',
  'BUSY', // a long-running script blocks the server
  'NOREPLICAS',
]);

/**
 * The code of a Redis error reply that retrying cannot fix (`WRONGTYPE …` → `WRONGTYPE`), or
 * undefined for anything else: a transient reply, a timeout, a dropped connection.
 */
export function finalReplyErrorCode(error: unknown): string | undefined {
  if (!(error instanceof Error) || error.name !== 'ReplyError') return undefined;
  const code = /^[A-Z]+/.exec(error.message)?.[0] ?? 'ERR';
  return TRANSIENT_CODES.has(code) ? undefined : code;
}
