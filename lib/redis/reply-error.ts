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
  const code = replyCode(error.message);
  return TRANSIENT_CODES.has(code) ? undefined : code;
}

/**
 * `WRONGTYPE …` → `WRONGTYPE`. Before Redis 7 an error raised inside a script comes wrapped —
 * `ERR Error running script (call to f_…): @user_script:1: -READONLY You can't write …` — so
 * the code it carries is taken from the end.
 */
function replyCode(message: string): string {
  // Redis 7 reports a command inside a script that the user's ACL forbids (PUBLISH, say) as ERR.
  if (/^ERR The user executing the script can't run/.test(message)) return 'NOPERM';
  const code = /^[A-Z]+/.exec(message)?.[0] ?? 'ERR';
  if (code !== 'ERR' || !message.startsWith('ERR Error running script')) return code;
  const carried = [...message.matchAll(/(?:^|[\s:])-?([A-Z]{2,})(?=\s)/g)]
    .map((match) => match[1])
    .filter((found) => found !== 'ERR');
  return carried.at(-1) ?? 'ERR';
}
