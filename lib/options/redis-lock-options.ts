import type { ClusterNode, ClusterOptions } from 'ioredis';
import type { RedisConnectionOption } from '../redis/redis-client';
import type { LeaderRoleOption } from './leader-options';
import type { LockExceptionFactory } from './lock-failure';
import type { TelemetryOptions } from './telemetry-options';

export type { LockExceptionFactory, LockFailure } from './lock-failure';

/** `WAIT`-based replica acknowledgement of a grant. */
export interface ReplicaAckOptions {
  /** Replicas that must have the lock before the grant counts. */
  minReplicas: number;
  /** How long (ms) `WAIT` may block for them. */
  timeout: number;
}

/** Redlock mode: a lock needs a majority of independent Redis primaries. */
export interface RedlockOptions {
  /** The independent primaries (3 or 5 is usual): URLs, ioredis options or clients. */
  nodes: RedisConnectionOption[];
  /**
   * How long (ms) one node may take to answer before it counts as a "no".
   * @default 200
   */
  nodeTimeout?: number;
  /**
   * Clock drift allowance as a fraction of the ttl (plus 2 ms): a grant is valid only if
   * `ttl − elapsed − drift > 0`.
   * @default 0.01
   */
  driftFactor?: number;
  /**
   * How long (ms) after a node (re)starts its grants do not count towards the quorum: a node that
   * restarted without persistence has forgotten leases still running on the others. Set it to the
   * longest lease any client takes (ttl or `extend()`); 0 turns the check off. A node's start comes
   * from `INFO server` (the lock's Redis user needs +info).
   * @default the module's `ttl`
   */
  restartGrace?: number;
}

/** Redis Cluster nodes to connect to (the module creates and closes the `Cluster`). */
export interface ClusterConnectionOptions {
  nodes: ClusterNode[];
  options?: ClusterOptions;
}

/** What a `@Locked` method does when the lock is busy after its `wait` budget. */
export type OnBusyPolicy = 'throw' | 'skip';

/** What the startup check does when Redis does not answer or refuses the lock's commands. */
export type StartupCheckMode = 'warn' | 'fail' | 'off';

/** What a `@Locked` method (or `withLock`) does when its lock was lost while the work ran. */
export type OnLostPolicy = 'throw' | 'log';

/** Options of `RedisLockModule.forRoot()` / `forRootAsync()`; every field has a default. */
export interface RedisLockModuleOptions {
  /**
   * Redis to lock on: a URL (`redis://host:6379/0`, `rediss://` for TLS), ioredis options
   * (including Sentinel options), or an existing ioredis `Redis`/`Cluster` client — or an
   * `iovalkey` one, which has ioredis' interface, or a connected node-redis v5 `createClient()` /
   * `createCluster()` one. The module closes only connections it created itself: with ioredis
   * when it is installed, else with node-redis.
   * @default 'redis://127.0.0.1:6379'
   */
  redis?: RedisConnectionOption;
  /**
   * Redis Cluster startup nodes, instead of `redis` (or pass an ioredis `Cluster` as `redis`).
   * Lock keys carry a hash tag so each lock's keys share one slot; release messages use sharded
   * pub/sub (Redis ≥ 7).
   */
  cluster?: ClusterConnectionOptions;
  /**
   * Redlock mode over independent primaries, instead of `redis`. docs/deployment.md says what it
   * does and does not guarantee.
   */
  redlock?: RedlockOptions;
  /**
   * After each grant, `WAIT` until `minReplicas` replicas have the lock (up to `timeout` ms), and
   * roll the grant back otherwise (`RedisUnavailableError`). Single primary / Sentinel only.
   */
  replicaAck?: ReplicaAckOptions;
  /**
   * First come, first served: waiters queue in Redis, and a release hands the lock straight to
   * the longest-waiting live one (no race between woken waiters, no barging by newcomers). The
   * same for a semaphore (`permits`): each freed permit goes to the first in line. With nobody
   * waiting it runs default mode's commands (a release adds one check for a queue). Contended, it
   * costs two more keys per lock and a queue refresh by each waiter every
   * `min(ttl, waiterTtl) / 3`; a waiter that dies while queued can hold up the queue for at most
   * `waiterTtl` (`max(1000, 2 × commandTimeout)` ms). One Redis or a Cluster; not with `redlock`
   * or `replicaAck`. Use it for every service that locks the same keys. Off by default: in fair
   * mode multi-key locks take their keys one by one (docs/guarantees.md#fair-mode has the
   * measurements).
   * @default false
   */
  fair?: boolean;
  /**
   * Read-write locks: a writer waiting for readers to leave holds back new readers meanwhile, so a
   * steady stream of readers cannot starve it. A writer that dies while waiting holds them back
   * for at most `max(1000, 2 × commandTimeout)` ms. Override it per write call. Must stay on in
   * fair mode, where writers queue and the queue holds new readers back: off module-wide, it would
   * keep every call out of the queue. A write call may turn it off for itself (it then takes no
   * place in the queue). docs/read-write.md.
   * @default true
   */
  writerPriority?: boolean;
  /**
   * Prefix of every Redis key this library writes. Keys are `<prefix>{<lock key>}` plus
   * `:fence` (fence counter) and `:released` (release channel), all in one hash slot.
   * @default 'lock:'
   */
  prefix?: string;
  /**
   * How long (ms) a lock's fence counter outlives the lock's last lease. Every key the library
   * writes has a TTL: the lease its `ttl`, the counter the lease plus this. A key locked again
   * within it continues its counter (fence + 1); after it, the counter has expired and starts
   * again from Redis' clock in microseconds, still above every earlier fence unless that clock
   * has moved back by more than the time since. Everything under `prefix` is gone at most
   * `ttl + fenceRetention` after the last release (`ttl`: the last lease set, `extend()` included).
   * @default 60000
   */
  fenceRetention?: number;
  /**
   * Names this process in the holder record written beside each lock it takes, which
   * `LockService.inspect()`, `list()` and the `nestjs-redis-lock` command show. Read only by
   * inspection: ownership is still the lock's random token alone.
   * @default `${os.hostname()}:${process.pid}`
   */
  instanceId?: string;
  /**
   * Lease length in ms. While a lock is held the watchdog renews it every `ttl / 3`, so a long
   * task keeps its lock and a crashed holder's lock frees within `ttl`.
   * @default 30000
   */
  ttl?: number;
  /**
   * Longest time (ms) a lock may be held, however long its work runs. When it is reached, renewal
   * stops, the lock's `signal` aborts with `LockLostError` (reason `'max-hold'`), the loss is
   * reported (`'lost'` event and log) and the key is released, so the next holder gets it at once.
   * Use it to bound what a hung handler can block. `Infinity` (the default) sets no bound: the
   * watchdog renews a lock for as long as its work runs, as a lease lock with renewal is expected
   * to — a bound by default would abort legitimate long jobs (reports, migrations) halfway.
   * Override it per call (`acquire`, `withLock`, `@Locked`), `Infinity` lifting the module's bound.
   * @default Infinity
   */
  maxHold?: number;
  /**
   * Shortest time (ms) a lock is held, counted from its acquisition: when the work ends sooner —
   * by returning or by throwing — the key is not deleted but kept (its lease shortened, owner
   * checked) until the minimum has passed, and the release counts as done for the caller. For a
   * scheduled job under `onBusy: 'skip'`: a job that returns at once would otherwise free the key
   * before another replica's timer fires for the same tick. Never more than `maxHold`. 0 (the
   * default) deletes the key as soon as the work ends. Override it per call.
   * @default 0
   */
  minHold?: number;
  /**
   * Default wait budget in ms for acquiring a busy lock; 0 fails at once (what one-order-per-user
   * needs). `LockService.acquire` and `@Locked` use it when the call does not say.
   * @default 0
   */
  wait?: number;
  /**
   * Upper bound of the random delay (ms) added to the fallback retry of a waiter, so waiters
   * that missed a release message do not retry in lock-step.
   * @default 10
   */
  retryJitter?: number;
  /**
   * Longest lock key (in characters, before the prefix) accepted; longer ones are a `LockKeyError`.
   * @default 512
   */
  maxKeyLength?: number;
  /**
   * How long (ms) to wait for Redis to answer one lock command before failing with
   * `RedisUnavailableError` — so an unreachable Redis fails a request instead of hanging it.
   * @default 2000
   */
  commandTimeout?: number;
  /**
   * At startup (`onModuleInit`, bounded by `commandTimeout`) the module checks Redis: it logs one
   * line with where it connects (never a password) and that Redis answered and ran a lock
   * command, and warns when `maxmemory-policy` may evict lock keys. When Redis does not answer or
   * refuses (connection refused, wrong password, an ACL without the lock's commands): `'fail'`
   * stops the bootstrap with that error, after `startupRetries` while Redis is out of reach, as
   * production apps expect of their data stores; `'warn'` logs the cause and the app starts (lock
   * calls then fail with it at once); `'off'` skips the check (no line, no Redis call at
   * startup). It also refuses a prefix where a read lock or a semaphore of version 0.1.0 is held
   * (its readers' or permits' key beside the lock key, found by SCAN), which this version could
   * not exclude. `new LockService()` outside Nest runs no check.
   * @default 'fail'
   */
  startupCheck?: StartupCheckMode;
  /**
   * With `startupCheck: 'fail'`: how many times the check is tried again while Redis is out of
   * reach (connection refused or reset, no answer within `commandTimeout`), 0.5 s, 1 s, 2 s, … (at
   * most 5 s) apart, before the bootstrap fails — so an app whose Redis starts a moment later (a
   * compose stack, a pod beside its Redis) still starts. A refusal that a retry cannot fix (a wrong
   * password, an ACL without the lock's commands) fails at once.
   * @default 3
   */
  startupRetries?: number;
  /**
   * Default of `@Locked({ onBusy })`: `'throw'` a `LockNotAcquiredError` (HTTP 409), or `'skip'`
   * the call and return `undefined` (for jobs that must run on one instance only).
   * @default 'throw'
   */
  onBusy?: OnBusyPolicy;
  /**
   * Default of `@Locked({ onLost })` and `withLock`: when the lock was lost while the work ran,
   * `'throw'` a `LockLostError` after the work settles, or only `'log'` it.
   * @default 'throw'
   */
  onLost?: OnLostPolicy;
  /**
   * Default of `@Locked({ reentrant })`: a locked call nested in a locked call on the same key
   * (same async call chain) re-uses the held lock instead of waiting for itself.
   * @default true
   */
  reentrant?: boolean;
  /**
   * On shutdown (`close()`, or Nest's `beforeApplicationShutdown`): how long (ms) to wait for
   * locks still held to be released by their work, while the watchdog keeps renewing them. New
   * acquires are refused meanwhile (`LockServiceClosedError`). When it runs out, each lock still
   * held has its signal aborted (`LockLostError`, reason `'shutdown'`) and a `'lost'` event, and
   * only then is released. 0 aborts and releases at once. Keep it below your platform's kill
   * timeout (Kubernetes: `terminationGracePeriodSeconds`, 30 s by default).
   * @default 10000
   */
  shutdownGrace?: number;
  /**
   * HTTP status sent when a `@Locked` route finds its lock busy.
   * @default 409
   */
  busyStatus?: number;
  /**
   * Builds the exception for a lock failure on an HTTP route, instead of the default answer:
   * `busyStatus` (409) with `Retry-After` for a busy lock, 400 for a bad key, 503 when Redis is
   * out of reach or refuses the command, 500 for a lock lost while the work ran. Its bodies are
   * yours: the error it receives carries the key and Redis' reply, so leave them out of what
   * clients see unless `errorDetails: 'detailed'` is what you want.
   */
  exceptionFactory?: LockExceptionFactory;
  /**
   * What callers are told about a lock failure — HTTP bodies, and `LockTransportError` data for
   * microservice and WebSocket callers. `'safe'`: Nest's shape (`statusCode`, `error`, `message`)
   * with a generic message, and the class name on transports; never the key (keys often hold
   * e-mails or user ids), a Redis reply or advice meant for developers. `'detailed'`: also the
   * error's own message, the key and when to retry — for development or trusted callers. Either
   * way the detail is logged (context `RedisLock`) and the status is the same; an
   * `exceptionFactory` decides HTTP bodies itself.
   * @default 'safe'
   */
  errorDetails?: LockErrorDetails;
  /**
   * Lock failures thrown outside a `@Locked` handler — by a `@Locked` provider method or a
   * `withLock` a handler calls — that reach Nest's default exception handling answer as `@Locked`
   * handlers do (`LockExceptionFilter`): on HTTP `busyStatus` (409) with `Retry-After`, 400, 500 or
   * 503; `LockTransportError` data to microservice and WebSocket callers; a `LockGraphQLError` to
   * GraphQL clients. Every filter of your own still goes first: on the method or the class, through
   * `app.useGlobalFilters()` or an `APP_FILTER` provider. `false` leaves them to Nest (a 500).
   * @default true
   */
  answerLockErrors?: boolean;
  /**
   * The level of the line logged for a busy lock's answer (a 409, a `LOCK_BUSY`, busy data), or
   * `false` for none. A busy lock is routine traffic: `'verbose'`, the lowest level, is dropped by
   * an app whose logger leaves verbose out (`logger: ['log', 'warn', 'error']`); Nest's default
   * logger prints every level. Busy events (`@EventPattern`, which drop the event) stay warnings.
   * @default 'verbose'
   */
  busyLogLevel?: BusyLogLevel;
  /**
   * OpenTelemetry metrics and spans, through `@opentelemetry/api` when it is installed and an SDK
   * is registered (otherwise nothing is recorded). Lock keys stay out of spans unless `keys`
   * says otherwise. docs/observability.md lists the metrics and spans.
   * @default { keys: 'none' }
   */
  telemetry?: TelemetryOptions;
  /**
   * Roles this replica campaigns for once the application has bootstrapped, each a name or
   * `{ role, ...LeadOptions }`: as `LockService.lead(role, options)` would, and before any
   * `@WhenLeader(role)` method campaigns with the defaults. Refused at startup on Redlock.
   * docs/leader-election.md.
   * @default []
   */
  leaders?: readonly LeaderRoleOption[];
}

/** The level of a busy lock's log line, or `false` for none: see `busyLogLevel`. */
export type BusyLogLevel = 'verbose' | 'debug' | 'log' | 'warn' | false;

/** How much a lock failure's answer tells the caller: see `errorDetails`. */
export type LockErrorDetails = 'safe' | 'detailed';

/** Options with every default filled in and validated. */
export type ResolvedRedisLockOptions = Required<Omit<RedisLockModuleOptions, OptionalFeature>> &
  Pick<RedisLockModuleOptions, OptionalFeature>;

type OptionalFeature = 'exceptionFactory' | 'cluster' | 'redlock' | 'replicaAck';
