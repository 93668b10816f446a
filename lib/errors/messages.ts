/**
 * The one catalogue of the library's messages, so wording stays consistent and each one says what
 * to do next. One section per feature, each its own export:
 * - `messages`: lock calls, options, Redis, Redlock, `@Locked()`, handles and shutdown;
 * - `keyMessages`: key templates that cannot work (bootstrap errors);
 * - `multiKeyMessages`, `readWriteMessages`, `semaphoreMessages`: those kinds of lock;
 * - `publicMessages`: the only texts a caller of the app (HTTP, GraphQL, RPC, WebSocket) sees by
 *   default. Every other section is for developers and operators: errors and log lines.
 */

// ---- For developers and operators: lock calls, options, Redis, the decorator --------------------

export const messages = {
  // Lock calls and keys
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

  // Options and the CLI
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

  // Redis: connections, the startup check, commands and their log lines
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
  legacyLayout: (name: string, prefix: string) =>
    `Startup check: found "${name}", the ${name.endsWith(':permits') ? 'permits of a semaphore' : 'readers of a read lock'} ` +
    `in the key layout of nestjs-redis-lock 0.1.0, under the prefix "${prefix}". This version ` +
    'keeps readers and permits under the lock key itself and would not see these: a writer, or ' +
    `another kind of lock on the key, could get in beside them. Stop every 0.1.0 instance on this ` +
    `prefix, wait until no "${prefix}{*}:readers" or "${prefix}{*}:permits" key is left (they ` +
    'expire with their leases), then start this version — or give it another `prefix`.',
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

  // Replicas and Redlock
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

  // @Locked() and the transports it serves
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

  // Handles and shutdown
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

  // Redis client packages (ioredis, node-redis)
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

// ---- Key templates ------------------------------------------------------------------------------

/**
 * The messages of key templates that cannot work: a placeholder that names nothing, or two
 * things, or a source Nest does not fill. Each stops the app at bootstrap (or the class at its
 * definition) and says what to write instead.
 */
export const keyMessages = {
  unknownPlaceholder: (
    template: string,
    placeholder: string,
    where: string,
    known: string[],
    meant?: string,
  ) =>
    `Lock key template "${template}" on ${where}: placeholder <${placeholder}> names no parameter` +
    (known.length
      ? ` (parameters: ${known.join(', ')})`
      : ' (the method has no named parameters)') +
    (meant ? `; did you mean <${meant}>?` : '.') +
    ' Fix the placeholder, or use an argument index like <0.id>.',
  ambiguousPlaceholder: (template: string, placeholder: string, where: string, matches: string[]) =>
    `Lock key template "${template}" on ${where}: <${placeholder}> matches ${matches.length} ` +
    `parameters: ${matches.join(', ')}. A key part must come from one place: rename a parameter, ` +
    'or name the source, e.g. <params.x> or <body.x>.',
  unknownRoutePlaceholder: (
    template: string,
    placeholder: string,
    where: string,
    meant: string[],
    parameters: string[],
    namesHidden: boolean,
  ) =>
    `Lock key template "${template}" on ${where}: <${placeholder}> matches no parameter of the ` +
    `handler (${parameters.length ? `parameters: ${parameters.join(', ')}` : 'it has no bound parameters'}). ` +
    `A bare name must be a parameter's name or the name its decorator gives it (@Param('x') answers ` +
    `to <x>); otherwise name the source. Did you mean ${meant.join(', ')}?` +
    (namesHidden
      ? ' The parameter names could not be read (another decorator may wrap the method): put ' +
        '@Locked() closest to the method, or use the names the parameter decorators give.'
      : ''),
  unknownResolverPlaceholder: (
    template: string,
    placeholder: string,
    where: string,
    parameters: string[],
    namesHidden: boolean,
  ) =>
    `Lock key template "${template}" on ${where}: <${placeholder}> matches no parameter of the ` +
    `resolver (${parameters.length ? `parameters: ${parameters.join(', ')}` : 'it has no bound parameters'}). ` +
    "A bare name must be a parameter's name or the name @Args gives it (@Args('uid') userId " +
    'answers to <uid> and <userId>); reach inside with a dotted path (<input.userId>). Bind the ' +
    'value with @Args(), @Parent() or @Context(), or use a key function.' +
    (namesHidden
      ? ' The parameter names could not be read (another decorator may wrap the method): put ' +
        '@Locked() closest to the method, or use the names @Args gives.'
      : ''),
  lockedSubscription: (where: string) =>
    `@Locked() on ${where}: a subscription returns an event stream, so a lock would cover only ` +
    "the stream's creation, not the events. Lock the work that publishes the events instead.",
  unknownRouteParam: (template: string, placeholder: string, where: string, params: string[]) =>
    `Lock key template "${template}" on ${where}: <${placeholder}> names no param of the route ` +
    `(route params: ${params.length ? params.join(', ') : 'none'}). Fix the name; for a param a ` +
    "global prefix or a RouterModule path adds, bind it on the handler with @Param('name').",
  sourceConflict: (template: string, placeholder: string, where: string, parameter: string) =>
    `Lock key template "${template}" on ${where}: <${placeholder}> names a part of the request, ` +
    `and also the parameter ${parameter}, which is bound to something else. Rename the parameter, ` +
    'or key on it by the name its decorator gives it.',
  badTemplate: (template: string, why: string) =>
    `Lock key template "${template}" is invalid: ${why}.`,
  paramNamesUnreadable: (where: string) =>
    `Cannot read the parameter names of ${where}: another decorator may wrap it. ` +
    'Put @Locked() closest to the method, or use argument indexes like <0.id>, or a key function.',
  keyFunctionResult: (where: string, what: string) =>
    `The key function of @Locked() on ${where} returned ${what}; it must return a non-empty ` +
    'string, or a non-empty array of them to lock several keys together.',
};

// ---- Multi-key locks ----------------------------------------------------------------------------

/** Messages of multi-key locks, for developers (errors); each says what to do next. */
export const multiKeyMessages = {
  noKeys: () =>
    'A multi-key lock call got an empty array of keys. Pass at least one key, e.g. ' +
    "`['account:1', 'account:2']`; an empty array would protect nothing.",
  notAnArray: (what: string) => `A multi-key lock call needs an array of key strings, got ${what}.`,
  exclusiveOnly: (option: string) =>
    `Lock option \`${option}\` cannot be combined with several keys: a multi-key lock takes a ` +
    'plain exclusive lock on every key. Lock the keys one call each for that kind of lock.',
  partlyHeld: (held: number, total: number) =>
    `This call chain already holds ${held} of the ${total} keys of this multi-key lock call, ` +
    'through other lock calls. Taking the rest now could deadlock with a caller that takes them ' +
    'in another order: take every key in one call at the outermost level (a nested call on all ' +
    'of them, or some of them, then joins that lock).',
  together: (keys: readonly string[]) =>
    `(one of the ${keys.length} keys asked for together: ` +
    `${keys.map((key) => `"${key}"`).join(', ')}; none of them was taken)`,
};

// ---- Read-write locks ---------------------------------------------------------------------------

/** Messages of read-write locks, for developers (errors); each says what to do next. */
export const readWriteMessages = {
  upgrade: (key: string) =>
    `Lock "${key}" is held for reading by this call chain, which now asks to write it: a write ` +
    'lock waits for every reader to leave, this one included, so it would wait for itself. ' +
    "Take the write lock (mode 'write', the default) in the outer call instead, or release the " +
    'read lock before writing.',
  priorityOnRead: () =>
    "Lock option `writerPriority` applies to writers (mode 'write'): it says whether a writer " +
    'waiting for readers holds back new readers. Leave it out of read locks.',
  priorityOffInFairMode: () =>
    'Module option `writerPriority: false` does not go with `fair: true`: module-wide it would ' +
    "take every lock call out of fair mode's queue (a mutex is a writer too). Give " +
    '`writerPriority: false` to the write calls that should hold nobody back, or turn `fair` off.',
  redlock: () =>
    "Read locks (mode 'read') are not available with `redlock`: a reader's share would need its " +
    'own quorum, which Redlock mode does not keep. Use one Redis (or a Cluster) for read-write ' +
    'locks, or an exclusive lock.',
};

// ---- Semaphores ---------------------------------------------------------------------------------

/** Messages of semaphores (`permits`), for developers (errors); each says what to do next. */
export const semaphoreMessages = {
  limitConflict: (lock: string, held: number, asked: number) =>
    `Semaphore ${lock} is held with permits: ${held}, and this call asks for permits: ${asked}. ` +
    'Every holder of one semaphore key must name the same `permits`: change the call (or use a ' +
    'different key), or roll the new limit out once no holder of the old one is left — the limit ' +
    'resets when the last permit is released or expires.',
  nestedLimitConflict: (key: string, held: number, asked: number) =>
    `A call nested in a holder of semaphore "${key}" (permits: ${held}) asks for permits: ` +
    `${asked}. A nested call re-uses the permit its caller holds, so it must name the same ` +
    '`permits`: pass the same number, or `reentrant: false` to wait for a permit of its own.',
  nestedKindChange: (key: string, held: string, asked: string) =>
    `Lock "${key}" is held by this call chain as ${held}, and a call nested in it asks for it as ` +
    `${asked}. Every kind of lock on one name excludes the others, so the nested call would wait ` +
    'for its own chain: take one kind of lock on the name for the whole chain (the one the outer ' +
    'call takes, or the outer call takes the inner one instead), or lock another key inside.',
  notWithReadWrite: (option: string) =>
    `\`permits\` and \`${option}\` do not go together: that is an option of read-write locks, and ` +
    'a semaphore has no readers or writers (its permits are all alike). Drop it for a semaphore ' +
    'of N permits, or drop `permits` for a read-write lock.',
  redlock: () =>
    'Semaphores (`permits`) need one Redis or a Cluster: a Redlock quorum cannot count the ' +
    'holders of a key across independent nodes. Drop `permits` on Redlock, or use a ' +
    'single-node/Cluster LockService for semaphores.',
};

// ---- Leader election -----------------------------------------------------------------------------

/** Messages of leader election (`lead`, `@WhenLeader`, the `leaders` option). */
export const leaderMessages = {
  unsupportedStore: (store: string) =>
    `Leader election needs one Redis (a single node or Sentinel), a Cluster or the memory store, ` +
    `not ${store}: a term must be one counter on one server, which a Redlock quorum does not ` +
    'have. Campaign on a single-node or Cluster LockService, or drop the role.',
  badRole: (role: unknown) =>
    `A leader role must be a non-empty string (it names the lease, like a lock key); got ` +
    `${typeof role === 'string' ? '""' : typeof role}. Pass e.g. 'scheduler'.`,
  alreadyCampaigning: (role: string) =>
    `This LockService already campaigns for role "${role}" (one campaign per role and process, ` +
    'so `@WhenLeader` knows whose term to follow). Use `locks.leadership(role)` to get its ' +
    'handle, or `resign()` it first.',
  revoked: (role: string, term: number, why: string) =>
    `Leadership of role "${role}" (term ${term}) ended: ${why}.`,
  resigned: () => 'this replica resigned it',
  notLeading: (role: string) =>
    `This replica does not lead role "${role}" now: wait for \`onElected\`, or check ` +
    '`isLeader` before acting as leader.',
  electedCallbackFailed: (role: string, what: string, reason: string) =>
    `The ${what} callback of role "${role}" failed: ${reason}`,
  campaignFailed: (role: string, reason: string, delay: number) =>
    `Campaigning for role "${role}" failed: ${reason}; trying again in ${delay} ms.`,
  notBound: (where: string) =>
    `@WhenLeader on ${where} was called on an instance Nest did not give a LockService: create ` +
    'it through Nest in a module that sees RedisLockModule.',
  notAMethod: (where: string) =>
    `@WhenLeader() can only decorate methods; ${where} is not a method.`,
};

// ---- Public: what a caller of the app may see (HTTP, GraphQL, RPC, WebSocket) -------------------

/**
 * What callers are told about a lock failure by default (`errorDetails: 'safe'`): nothing about
 * the request, the key or Redis, and no advice meant for developers — that goes to the log.
 */
export const publicMessages = {
  busy: () => 'Another request is working on the same resource. Try again shortly.',
  badRequest: () => 'The request is missing a value this operation needs, or a value is invalid.',
  unavailable: () => 'The service is temporarily unavailable. Try again later.',
  serverError: () => 'The server could not process the request.',
  outcomeUnknown: () =>
    'The request was processed, but its outcome could not be confirmed. Check the result before ' +
    'repeating it.',
};

/**
 * The log line that keeps what a lock failure's answer leaves out: for operators, never sent to the
 * caller; it stands here beside the answers it completes.
 */
export const failureAnswered = (where: string, answer: string, error: Error): string =>
  `${where} answered ${answer}: ${error.name}: ${error.message}`;

// ---- Helpers of the sections above --------------------------------------------------------------

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
