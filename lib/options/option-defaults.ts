import { hostname } from 'node:os';
import type { OptionNames } from './known-options';
import type {
  ClusterConnectionOptions,
  RedisLockModuleOptions,
  RedlockOptions,
  ReplicaAckOptions,
  ResolvedRedisLockOptions,
} from './redis-lock-options';

/** The one place defaults live. */
export const DEFAULT_OPTIONS: ResolvedRedisLockOptions = {
  redis: 'redis://127.0.0.1:6379',
  prefix: 'lock:',
  ttl: 30_000,
  maxHold: Infinity,
  minHold: 0,
  wait: 0,
  retryJitter: 10,
  maxKeyLength: 512,
  commandTimeout: 2_000,
  shutdownGrace: 10_000,
  startupCheck: 'fail',
  startupRetries: 3,
  onBusy: 'throw',
  onLost: 'throw',
  reentrant: true,
  busyStatus: 409,
  fair: false,
  writerPriority: true,
  fenceRetention: 60_000,
  errorDetails: 'safe',
  answerLockErrors: true,
  busyLogLevel: 'verbose',
  telemetry: { keys: 'none' },
  leaders: [],
  instanceId: `${hostname()}:${process.pid}`,
};

/** Every option name, in the order the "valid options" hint lists them. */
export const OPTION_NAMES: OptionNames<RedisLockModuleOptions> = {
  redis: true,
  cluster: true,
  redlock: true,
  replicaAck: true,
  fair: true,
  writerPriority: true,
  prefix: true,
  ttl: true,
  wait: true,
  retryJitter: true,
  maxKeyLength: true,
  commandTimeout: true,
  fenceRetention: true,
  shutdownGrace: true,
  maxHold: true,
  minHold: true,
  startupCheck: true,
  startupRetries: true,
  onBusy: true,
  onLost: true,
  reentrant: true,
  busyStatus: true,
  exceptionFactory: true,
  errorDetails: true,
  answerLockErrors: true,
  busyLogLevel: true,
  telemetry: true,
  instanceId: true,
  leaders: true,
};
/**
 * Names from other Redis libraries' options that mean the connection: `url: 'redis://…'`,
 * `host`/`port` as ioredis takes them, are all given to `redis` here.
 */
export const OPTION_ALIASES: Readonly<Record<string, string>> = {
  url: 'redis',
  uri: 'redis',
  redisUrl: 'redis',
  connection: 'redis',
  client: 'redis',
  host: 'redis',
  port: 'redis',
  password: 'redis',
  username: 'redis',
  db: 'redis',
  sentinels: 'redis',
  nodes: 'cluster',
};
export const CLUSTER_OPTION_NAMES: OptionNames<ClusterConnectionOptions> = {
  nodes: true,
  options: true,
};
export const REDLOCK_OPTION_NAMES: OptionNames<RedlockOptions> = {
  nodes: true,
  nodeTimeout: true,
  driftFactor: true,
  restartGrace: true,
};
export const REPLICA_ACK_OPTION_NAMES: OptionNames<ReplicaAckOptions> = {
  minReplicas: true,
  timeout: true,
};
