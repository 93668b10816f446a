/**
 * The catalogue of messages for developers and operators (errors and log lines), so wording stays
 * consistent and each one says what to do next. Key-template messages are in key-messages.ts, and
 * what callers of an app are told in public-messages.ts.
 */
export const messages = {
  notAcquired: (key: string, waitedMs: number, retryAfterMs: number | undefined) =>
    `Lock "${key}" is held by another holder` +
    (waitedMs > 0 ? ` (waited ${Math.round(waitedMs)} ms)` : '') +
    (retryAfterMs !== undefined ? `; it frees in at most ${retryAfterMs} ms` : '') +
    '. Retry later, or pass a larger `wait` budget.',
  lost: (key: string, reason: string) =>
    `Lock "${key}" was lost (${reason}) while it was held: the protected work may have overlapped ` +
    'with another holder. Treat its effects as unprotected; use `lock.fence` to let the store reject stale writes.',
  illFormedKey: () =>
    'A lock key must be well-formed Unicode: it contains a lone surrogate, which Redis would store ' +
    'as U+FFFD (so different keys would share a lock). Check how the key was built.',
  emptyKey: () => 'A lock key must be a non-empty string. Pass e.g. `order:${userId}`.',
  keyTooLong: (length: number, max: number) =>
    `Lock key is ${length} characters long, over the limit of ${max}. ` +
    'Lock on an id rather than a payload, or raise `maxKeyLength` in RedisLockModule options.',
  badKeyValue: (template: string, placeholder: string, what: string) =>
    `Lock key template "${template}": placeholder <${placeholder}> resolved to ${what}. ` +
    'A lock key part must be a non-empty string, a finite number, a bigint or a boolean; ' +
    'validate the input, or use a key function for anything else.',
  callerLeft: (where: string) =>
    `${where} was reached after its caller had left (a timeout answered while pipes ran), so it ` +
    'was not run and took no lock.',
  badOption: (name: string, value: unknown, expected: string) =>
    `Lock option \`${name}\` is ${describe(value)}; expected ${expected}.`,
  leaseTooShort: (name: string, value: number, shortest: number, max: number) =>
    `Lock option \`${name}\` is ${describe(value)}; expected a whole number of ms of at least ` +
    `${shortest} (and at most ${max}). A lock counts as held until its lease ends less a margin for ` +
    'clock drift; a shorter lease would be lost as it is granted, before its work began.',
  cliUnknownOption: (option: string, meant: string | undefined) =>
    `nestjs-redis-lock: unknown option ${option}` +
    (meant ? `; did you mean ${meant}?` : '.') +
    ' Run "nestjs-redis-lock --help" for usage.',
  cliOptionNeedsValue: (option: string) =>
    `nestjs-redis-lock: option ${option} needs a value. Run "nestjs-redis-lock --help" for usage.`,
  cliBadArguments: (problem: string) =>
    `nestjs-redis-lock: ${problem.replace(/\.?$/, '.')} Run "nestjs-redis-lock --help" for usage.`,
  unknownOption: (where: string, name: string, closest: string | undefined, valid: string[]) =>
    `${where}: \`${name}\` is not an option` +
    (closest ? `; did you mean \`${closest}\`?` : '.') +
    ` Valid options: ${valid.join(', ')}.`,
  minHoldOverMaxHold: (minHold: number, maxHold: number) =>
    `Lock option \`minHold\` (${minHold} ms) is longer than \`maxHold\` (${maxHold} ms): a lock ` +
    'cannot be held at least for longer than it may be held at most. Lower `minHold` or raise `maxHold`.',
  cronWithoutMinHold: (where: string) =>
    `${where} is a scheduled job under @Locked with onBusy 'skip' and no \`minHold\`: when the ` +
    "job ends before another replica's timer fires for the same tick, that replica finds the key " +
    'free and runs the tick again. Set `minHold` a little below the interval between runs (e.g. ' +
    "`@Locked('job', { onBusy: 'skip', minHold: 50_000 })` for a job run every minute).",
  badRedisUrl: (url: string) =>
    `RedisLockModule option \`redis\` is "${url}", not a valid Redis URL. ` +
    'Use redis://[user:password@]host:port[/db] or rediss:// for TLS.',
  redisUnavailable: (operation: string, ms: number) =>
    `Redis did not answer ${operation} within ${ms} ms. Check that Redis is running and that ` +
    'the `redis` option (REDIS_URL) points at it; raise `commandTimeout` for a slow link.',
  connectionFailed: (address: string, reason: string, detail: string, advice: string) =>
    `Redis ${address}: ${reason} (${detail}). ${advice}`,
  credentialsAdvice: () =>
    'Check the username and password in the `redis` option (redis://user:password@host:port).',
  aclAdvice: () =>
    "Grant the Redis user the lock's commands: +evalsha +eval +exists +subscribe (+info for " +
    "ioredis' ready check) and, inside the scripts, +get +set +pexpire +pttl +incr +del +publish " +
    '+time, on the lock prefix (keys and channels).',
  startupAnswered: (target: string, ms: number, details: string) =>
    `Redis ${target} answered in ${Math.round(ms)} ms${details}; lock commands work.`,
  startupNoAnswer: (target: string, ms: number) =>
    `Redis ${target} did not answer the startup check within ${ms} ms (\`commandTimeout\`). ` +
    'Check that Redis runs there and that the `redis` option (REDIS_URL) points at it.',
  startupRetry: (attempt: number, attempts: number, problem: string, delay: number) =>
    `Startup check: attempt ${attempt} of ${attempts} failed: ${problem} Trying again in ` +
    `${delay} ms (\`startupRetries\`).`,
  startupGaveUp: (attempts: number, seconds: number, problem: string) =>
    `Startup check: Redis could not lock after ${attempts} attempts over ` +
    `${seconds.toFixed(1)} s: ${problem} Make sure Redis runs at that address and answers, ` +
    "raise `startupRetries`, or set `startupCheck: 'warn'` to start without it (lock calls then " +
    'fail until it answers).',
  startupNotVotingYet: (problem: string) =>
    `Startup check: ${problem} Starting anyway: the nodes answer, and vote once restartGrace ` +
    'has passed; until then lock calls may be refused.',
  startupFailed: (problem: string) =>
    `Startup check: ${problem} Lock calls fail until this is fixed; set ` +
    "`startupCheck: 'fail'` to stop the application from starting instead.",
  startupNodeDown: (problem: string) =>
    `Startup check: ${problem} Locks need a majority of the Redlock nodes; this one counts as a ` +
    '"no" until it answers.',
  evictingPolicy: (address: string, policy: string) =>
    `Redis ${address} has maxmemory-policy ${policy}: under memory pressure it may evict lock ` +
    'keys (each has a TTL) and let a second holder in. Set maxmemory-policy to noeviction.',
  /** `lock "a"`, or `3 locks ("a", …)` for a batch. */
  lockNames: (locks: readonly { key: string }[]) => {
    const [first, second] = locks;
    if (!first) return 'no locks';
    return second ? `${locks.length} locks ("${first.key}", …)` : `lock "${first.key}"`;
  },
  commandRefused: (operation: string, subject: string, reply: string, code: string) =>
    `Redis refused ${operation} of ${subject}: ${reply}. ` +
    (code === 'WRONGTYPE'
      ? "Something else stores a value under the lock's key: give the locks a namespace of " +
        'their own with the `prefix` option.'
      : code === 'NOPERM'
        ? "The Redis user may not run the lock's commands. Its ACL needs, on the lock prefix " +
          '(keys and channels): +evalsha +eval +exists +subscribe, and inside the scripts +get ' +
          '+set +pexpire +pttl +incr +del +publish +time; fair mode also +@sortedset +@hash, a ' +
          'Cluster +command, and +spublish +ssubscribe on Redis 7 or later; replicaAck +wait.'
        : code === 'OOM'
          ? 'Redis is out of memory under a `noeviction` policy: free memory or raise `maxmemory`.'
          : 'Retrying will not help; check the Redis server version and configuration.'),
  classicPubSub: (node: string) =>
    `Redis Cluster node ${node} has no sharded pub/sub (Redis < 7), so release notifications use ` +
    'classic PUBLISH/SUBSCRIBE, which the Cluster broadcasts to every node. Once every node runs ' +
    'Redis 7 or later, restart the application to switch to sharded pub/sub.',
  pubSubUnknown: (node: string, why: string) =>
    `Redis Cluster node ${node} ${why}, so whether it has sharded pub/sub is unknown; release ` +
    'notifications use classic PUBLISH/SUBSCRIBE, which every version has. If every node runs ' +
    'Redis 7 or later, allow +command for the Redis user and restart the application to use ' +
    'sharded pub/sub.',
  releaseFailed: (key: string, reason: string) =>
    `Releasing lock "${key}" failed (${reason}); it expires by its TTL.`,
  renewFailed: (locks: string, reason: string) => `Renewing ${locks} failed: ${reason}; retrying.`,
  cleanUpFailed: (what: string, reason: string) => `${what} failed: ${reason}`,
  commandFailed: (operation: string, reason: string) => `Redis ${operation} failed: ${reason}`,
  subscribeFailed: (channel: string, reason: string) =>
    `Could not subscribe to ${channel}: ${reason}`,
  subscriberFailed: (reason: string) => `Release subscriber: ${reason}`,
  listenerFailed: (event: string, reason: string) => `A '${event}' listener failed: ${reason}`,
  clusterPubSubNoAnswer: () => 'No Redis Cluster node answered COMMAND INFO SPUBLISH',
  noAnswerWithin: (ms: number) => `No answer within ${ms} ms`,
  releaseUnknown: (key: string) =>
    `Releasing "${key}": the connection to Redis dropped before the answer came, so whether this ` +
    'release deleted the lock is unknown. It is gone by its TTL at the latest; nothing to undo.',
  replicasTooFew: (key: string, acknowledged: number, wanted: number, timeout: number) =>
    `Only ${acknowledged} of ${wanted} replicas acknowledged the lock "${key}" within ` +
    `${timeout} ms, so it was released. Check replication, or lower replicaAck.minReplicas.`,
  replicasUnconfirmed: (key: string) =>
    `The connection to Redis dropped while waiting for replicas to acknowledge the lock "${key}" ` +
    '(a failover?), so the answer may come from a primary that never had it; the grant was ' +
    'withdrawn. Retry the acquire.',
  redlockNoQuorum: (key: string, nodes: number, quorum: number, tally: RedlockTally) =>
    `Redlock could not tell whether "${key}" is free: ${tally.votes} of ${nodes} nodes granted it ` +
    `in time, ${quorum} needed` +
    (tally.restarted
      ? `; ${tally.restarted} restarted within restartGrace and do not vote yet`
      : '') +
    (tally.refused ? `; ${tally.refused} hold it for someone else` : '') +
    (tally.unanswered ? `; ${tally.unanswered} did not answer within nodeTimeout` : '') +
    (tally.late ? `; the grant took ${tally.late} ms of its ttl, leaving no time to hold it` : '') +
    (tally.unfenced ? '; too few of them confirmed its fence afterwards' : '') +
    '. Check that a majority of the nodes is reachable and fast, and that ttl is well above ' +
    'nodeTimeout; a node that just started votes once restartGrace has passed.',
  redlockTtlTooShort: (ttl: number, nodeTimeout: number, drift: number) =>
    `Redlock: ttl ${ttl} ms is short for nodeTimeout ${nodeTimeout} ms and a drift margin of ` +
    `${Math.ceil(drift)} ms. A node that takes the whole nodeTimeout leaves a grant ` +
    `${Math.floor(ttl - nodeTimeout - drift)} ms of validity, and a renewal sent every ttl / 3 ` +
    'no time to answer: grants then fail (RedisUnavailableError) or are lost right after. Use a ' +
    'ttl of at least 3 × (nodeTimeout + drift), or a lower nodeTimeout.',
  redlockNoInfo: (reply: string) =>
    `Redlock: a node refused INFO (${reply}), so its restarts cannot be told and its grants always ` +
    'vote. Allow +info for the lock user, or keep a restarted node out for the longest ttl yourself.',
  notBound: (where: string) =>
    `@Locked() on ${where} ran, but no LockService is bound to this instance. Import ` +
    'RedisLockModule.forRoot() in the module that provides it (or make it global), and let Nest ' +
    'create the instance (a provider or controller, not `new`).',
  syncMethod: (where: string, returned: string) =>
    `@Locked() on ${where} returned ${returned} synchronously: a locked call waits for its lock, ` +
    'so the method must return a Promise or an Observable (make it async). Its body ran once ' +
    'under the lock, which is released; every later call throws this at once, before locking. ' +
    'A type-checked build (tsc) reports it at compile time; transpile-only builds (SWC, tsx, ' +
    'vitest) do not.',
  declaredSync: (where: string, type: string) =>
    `@Locked() needs a method that returns a Promise or an Observable, and ${where} is declared ` +
    `to return ${type}: make it async (a locked call waits for its lock).`,
  notAMethod: (where: string) => `@Locked() can only decorate methods; ${where} is not a method.`,
  staticMethod: (where: string) =>
    `@Locked() cannot decorate the static method ${where}: a static method belongs to no ` +
    'instance Nest creates, so it has no LockService. Make it an instance method of a provider.',
  noLockService: (owner: string, module: string) =>
    `${owner} has @Locked() methods, but its module ${module} sees no LockService: import ` +
    'RedisLockModule.forRoot() (or a module that exports it) in that module, or make it global ' +
    '(`isGlobal: true`, the default).',
  eventNotHandled: (
    pattern: string,
    where: string,
    key: string | undefined,
    reason: string,
    busy: boolean,
  ) =>
    `Event ${pattern} was not handled by ${where}` +
    (key !== undefined ? ` (lock "${key}")` : '') +
    `: ${reason} No caller receives this error.` +
    (busy
      ? " Give the handler a `wait` budget so events on one key run one after another, or `onBusy: 'skip'` to drop duplicates on purpose."
      : ''),
  eventWaitZero: (pattern: string, where: string) =>
    `@Locked() on event handler ${where} (${pattern}) has \`wait: 0\`: an event that arrives while ` +
    'another one on the same key runs is dropped (and logged). Set `@Locked(key, { wait })` so ' +
    "events on one key run one after another, or `onBusy: 'skip'` to drop duplicates on purpose.",
  rpcHandler: (pattern: unknown) =>
    `Microservice handler${pattern === undefined ? '' : ` for ${JSON.stringify(pattern)}`}`,
  failedAfterResponseStarted: (reason: string) =>
    `${reason} The response had already started (a @Res() handler wrote to it), so no error ` +
    'status could be sent: it was ended as it was. Take locks before writing to the response.',
  holdEnded: (key: string) =>
    `The hold on lock "${key}" ended (its call settled, its Observable was torn down, or ` +
    'release() was called) and the lock may be released: stop the work, it is no longer protected.',
  callAfterRelease: (where: string) =>
    `${where} was reached after its lock was released (its caller had left while pipes ran), so ` +
    'it was not run: it would have run unprotected.',
  badExtension: (ms: unknown, shortest: number, max: number) =>
    `extend(ms) needs a whole number of ms from ${shortest} to ${max}, got ${describe(ms)}: a ` +
    'shorter lease has no time left once the margin for clock drift is taken off, and a longer one ' +
    'is more than a timer can wait. For a longer hold, let the watchdog renew the lease (and bound ' +
    'it with `maxHold`).',
  released: (key: string) => `Lock "${key}" was released; acquire it again.`,
  shuttingDown: () =>
    'LockService is shutting down; no new locks are granted. Stop starting locked work once ' +
    'shutdown begins (stop consumers and schedulers first), or retry on another instance.',
  noRedisClientPackage: () =>
    'nestjs-redis-lock needs a Redis client package to open its connection, and neither `ioredis` ' +
    'nor `redis` (node-redis v5) is installed. Run `npm install ioredis` (or `npm install redis`), ' +
    'or pass a client you made as the `redis` option.',
  needsIoredis: (what: string) =>
    `${what} are ioredis options, and \`ioredis\` is not installed (only \`redis\`, node-redis). ` +
    'Run `npm install ioredis`, or pass a node-redis client you made (`createClient(...)`, ' +
    '`createCluster(...)`, connected) as the `redis` option.',
  nodeRedisUnsupported: (kind: string) =>
    `The \`redis\` option is a node-redis ${kind}, which nestjs-redis-lock does not support. ` +
    'Pass a `createClient()` or `createCluster()` client, or ioredis Sentinel options ' +
    '(`{ sentinels, name }`) with `ioredis` installed.',
};

/** Why a Redlock acquire found no quorum: how many nodes voted, and what the others did. */
export interface RedlockTally {
  votes: number;
  restarted: number;
  refused: number;
  unanswered: number;
  /** Ms the grant took when a quorum granted but no validity was left, else 0. */
  late: number;
  /** A quorum granted, but fewer than a quorum confirmed the fence write-back. */
  unfenced: boolean;
}

function describe(value: unknown): string {
  if (typeof value === 'string') return `"${value}"`;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (value === null) return 'null';
  return typeof value;
}
