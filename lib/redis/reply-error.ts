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
 * Whether `error` is an error reply of the server: ioredis names it `ReplyError`; node-redis throws
 * an `ErrorReply` (or its `SimpleError`/`BlobError`), which keeps the name `Error`, so it is known
 * by its class — by name, as the class may come from another copy of the package.
 */
export function isReplyError(error: unknown): error is Error {
  if (!(error instanceof Error)) return false;
  if (error.name === 'ReplyError') return true;
  for (let at: unknown = Object.getPrototypeOf(error); at; at = Object.getPrototypeOf(at)) {
    if ((at as { constructor?: { name?: string } }).constructor?.name === 'ErrorReply') return true;
  }
  return false;
}

/**
 * The code of a Redis error reply that retrying cannot fix (`WRONGTYPE …` → `WRONGTYPE`), or
 * undefined for anything else: a transient reply, a timeout, a dropped connection.
 */
export function finalReplyErrorCode(error: unknown): string | undefined {
  if (!isReplyError(error)) return undefined;
  const code = replyCode(error.message);
  return TRANSIENT_CODES.has(code) ? undefined : code;
}

/**
 * Whether `error` (or an error it wraps, as `cause`) is a primary's `NOREPLICAS`: fewer replicas
 * in reach than its `min-replicas-to-write`, as when it is cut off from them.
 */
export function refusedForLackOfReplicas(error: unknown): boolean {
  for (let at = error, depth = 0; at instanceof Error && depth < 5; depth++) {
    if (isReplyError(at) && replyCode(at.message) === 'NOREPLICAS') return true;
    at = at.cause;
  }
  return false;
}

/**
 * `WRONGTYPE …` → `WRONGTYPE`. Before Redis 7 an error raised inside a script comes wrapped —
 * `ERR Error running script (call to f_…): @user_script:1: -READONLY You can't write …` — so
 * the code it carries is taken from the end.
 */
function replyCode(message: string): string {
  // A command inside a script that the user's ACL forbids (PUBLISH, say) comes as ERR: bare from
  // Redis 7, wrapped in "Error running script" before.
  if (/^ERR (?:Error running script .*)?The user executing the script can't run/.test(message))
    return 'NOPERM';
  const code = /^[A-Z]+/.exec(message)?.[0] ?? 'ERR';
  if (code !== 'ERR' || !message.startsWith('ERR Error running script')) return code;
  const carried = [...message.matchAll(/(?:^|[\s:])-?([A-Z]{2,})(?=\s)/g)]
    .map((match) => match[1])
    .filter((found) => found !== 'ERR');
  return carried.at(-1) ?? 'ERR';
}

/**
 * Refusals a server sends before it runs a command: a Cluster slot in migration (TRYAGAIN, or the
 * redirects ioredis follows until it gives up), a cluster or primary down, a dataset loading, a
 * busy script. Not READONLY or NOREPLICAS, which a script can meet after its first write.
 */
const UNRUN_CODES = new Set(['TRYAGAIN', 'CLUSTERDOWN', 'MASTERDOWN', 'LOADING', 'BUSY']);
/**
 * ioredis gave up following a Cluster's redirects (after TRYAGAIN it tries a random node, which may
 * answer MOVED, ASK or NOSCRIPT): the last answer, a refusal too, says so.
 */
const REDIRECTS =
  /^Too many Cluster redirections\. Last error: ReplyError: (MOVED|ASK|TRYAGAIN|CLUSTERDOWN|NOSCRIPT)\b/;

/**
 * Whether `error` (or the error it wraps, as `cause`) says Redis refused the command without
 * running it, so sending it again cannot run it twice. A timeout or a lost connection never does.
 */
export function refusedUnrun(error: unknown): boolean {
  for (let at = error; at instanceof Error; at = at.cause) {
    if (isReplyError(at) && UNRUN_CODES.has(/^[A-Z]+/.exec(at.message)?.[0] ?? '')) {
      return true;
    }
    if (REDIRECTS.test(at.message)) return true;
  }
  return false;
}
