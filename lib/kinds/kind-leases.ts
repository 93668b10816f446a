import type { AcquireTry, FairAcquireReply, RenewableLease } from '../backends/lock-backend';
import type { LeaseKind } from '../keys/lease-kind';
import type { LockRedisKeys } from '../keys/lock-keys';
import type { PublishCommand } from '../lua/lua-script';
import type { RedisCommander } from '../redis/redis-client';
import { finalReplyErrorCode } from '../redis/reply-error';

/**
 * The commands of one kind of lease — a mutex (or a read-write lock's writer), a reader's share,
 * a semaphore's permit — on one store. Each kind's folder under `lib/kinds/` holds its Lua
 * scripts, its Redis adapter and its in-memory twin, both behind this interface; a store looks
 * the kind of a lease up once per command (`KindTable`) and never branches on it.
 */
export interface KindLeases {
  /**
   * Tries once: the fence (> 0) when granted, else -(ms until another try is worth it). `via` is
   * the connection a grant runs on where that is not the store's own (`replicaAck`).
   */
  acquire(
    keys: LockRedisKeys,
    token: string,
    ttl: number,
    how?: AcquireTry,
    via?: RedisCommander,
  ): Promise<number>;
  /** Compare-and-pexpire: whether `token` still held the lease. */
  extend(keys: LockRedisKeys, token: string, ms: number): Promise<boolean>;
  /**
   * Compare-and-delete and wake the waiters: whether `token` still held the lease, passed through
   * `then` in the same step (the store's check of the answer, on a path every release takes).
   */
  release<T>(keys: LockRedisKeys, token: string, then: (deleted: boolean) => T): Promise<T>;
  /**
   * `release` of several leases of this kind in one command (a multi-key set, one Redis or one
   * slot): one answer per lease, in order, passed through `then`. Absent: one release each.
   */
  releaseAll?<T>(
    keys: readonly LockRedisKeys[],
    tokens: readonly string[],
    then: (deleted: boolean[]) => T,
  ): Promise<T>;
  /**
   * The watchdog's renewal of a batch of this kind's leases, in as few commands as the kind and
   * topology allow: one answer per lease, in order — undefined where it could not be told.
   */
  renew(leases: readonly RenewableLease[]): Promise<(boolean | undefined)[]>;
  /** Fair mode's queue and hand-off, where the kind has one (readers never queue). */
  readonly fair?: FairLeases;
}

/** Fair mode for one kind: waiters queue in the store, and a release hands over to the first. */
export interface FairLeases {
  /**
   * `wanted`: false once the call gave up; a try sent in more than one command (see
   * `fair-quick.script.ts`) sends no further command then, and answers busy.
   */
  acquire(
    keys: LockRedisKeys,
    token: string,
    ttl: number,
    queue: boolean,
    waiterTtl: number,
    wanted?: () => boolean,
  ): Promise<FairAcquireReply>;
  /** `plain`: the lease was granted plain (`FairAcquireReply`); a kind may release it cheaper. */
  release(keys: LockRedisKeys, token: string, plain?: boolean): Promise<boolean>;
}

/** Every kind of lease a store serves, by `LeaseKind.type`: the one lookup a store makes. */
export type KindTable = Readonly<Record<LeaseKind['type'], KindLeases>>;

/** What every kind's Redis adapter shares: the connection and how its grants and releases run. */
export interface RedisKindContext {
  readonly client: RedisCommander;
  /** A Cluster: multi-key scripts must stay within one slot. */
  readonly cluster: boolean;
  /** How long (ms) a fence counter outlives the lease of a holder (`fenceRetention`). */
  readonly fenceRetention: number;
  /** Written beside each grant, as who holds it (`instanceId`). */
  readonly instanceId: string;
  /** The command releases publish with now: `SPUBLISH` on a Cluster with sharded pub/sub. */
  publish(): PublishCommand;
  /** A channel's name as subscribers know it (ioredis' `keyPrefix` prefixes KEYS only). */
  channel(name: string): string;
  /** Connection losses so far: a reply that crossed one may belong to a re-sent command. */
  resets(): number;
}

/**
 * Renews a watchdog batch that may hold several kinds: each kind's leases go to that kind as one
 * batch of their own, all sent together; the answers come back in the leases' order.
 */
export function renewByKind(
  kinds: KindTable,
  leases: readonly RenewableLease[],
): Promise<(boolean | undefined)[]> {
  const first = leases[0]?.redisKeys.kind.type;
  if (first === undefined) return Promise.resolve([]);
  if (leases.every((lease) => lease.redisKeys.kind.type === first)) {
    return kinds[first].renew(leases);
  }
  const groups = new Map<KindLeases, number[]>();
  leases.forEach((lease, index) => {
    const kind = kinds[lease.redisKeys.kind.type];
    const group = groups.get(kind);
    if (group) group.push(index);
    else groups.set(kind, [index]);
  });
  const answers = new Array<boolean | undefined>(leases.length);
  return Promise.all(
    [...groups].map(([kind, indexes]) =>
      kind.renew(indexes.map((i) => leases[i]!)).then((replies) => {
        indexes.forEach((leaseIndex, i) => (answers[leaseIndex] = replies[i]));
      }),
    ),
  ).then(() => answers);
}

/**
 * The watchdog's renewal of each lease by its own compare-and-pexpire, for the kinds whose leases
 * renew one by one (shares, permits): a foreign value under one of its names (WRONGTYPE) loses
 * that lease only, as "not ours"; an answer that could not be told is undefined (retried).
 */
export function renewOneByOne(
  kind: KindLeases,
  leases: readonly RenewableLease[],
): Promise<(boolean | undefined)[]> {
  return Promise.all(
    leases.map((lease) =>
      kind
        .extend(lease.redisKeys, lease.token, Math.ceil(lease.lease))
        .catch((error: unknown) =>
          finalReplyErrorCode(error) === 'WRONGTYPE' ? false : undefined,
        ),
    ),
  );
}

/**
 * A kind's in-memory twin: each command's body, run atomically by the memory store (one server,
 * no network), answering what the kind's script answers on Redis.
 */
export interface MemoryKindTwin {
  acquire(keys: LockRedisKeys, token: string, ttl: number, how?: AcquireTry): number;
  extend(keys: LockRedisKeys, token: string, ms: number): boolean;
  release(keys: LockRedisKeys, token: string): boolean;
}

/** The in-memory twin of a kind's fair mode (see `FairLeases`). */
export interface MemoryFairTwin {
  acquire(...args: Parameters<FairLeases['acquire']>): FairAcquireReply;
  release(keys: LockRedisKeys, token: string): boolean;
}

/**
 * A twin (and its fair mode) as the kind's commands: each body runs at once, atomically, through
 * `command` (which answers asynchronously, as a reply arrives, and refuses once the store closed).
 */
export function twinLeases(
  command: <T>(body: () => T) => Promise<T>,
  twin: MemoryKindTwin,
  fair?: MemoryFairTwin,
): KindLeases {
  return {
    acquire: (keys, token, ttl, how) => command(() => twin.acquire(keys, token, ttl, how)),
    extend: (keys, token, ms) => command(() => twin.extend(keys, token, ms)),
    release: (keys, token, then) => command(() => then(twin.release(keys, token))),
    releaseAll: (keys, tokens, then) =>
      command(() => then(keys.map((k, i) => twin.release(k, tokens[i]!)))),
    renew: (leases) =>
      command(() => leases.map((l) => twin.extend(l.redisKeys, l.token, Math.ceil(l.lease)))),
    fair: fair && {
      acquire: (...args) => command(() => fair.acquire(...args)),
      release: (keys, token) => command(() => fair.release(keys, token)),
    },
  };
}
