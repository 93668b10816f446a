import { LockKeyError } from '../errors/errors';
import { messages } from '../errors/messages';
import { EXCLUSIVE, type LeaseKind } from './lease-kind';

/**
 * What an operator sees a lock as: a mutex (or a writer), a read lock's readers, a semaphore —
 * the kinds of lease, by the same names. A role's leadership is no lock a key holds: it is read
 * by `LockService.inspectLeader`, never listed among the locks.
 */
export type LockKind = Exclude<LeaseKind['type'], 'leader'>;

/**
 * The suffix a role's leadership lives under, after `<prefix>{<role>}`: the lease, and after it
 * its fence counter and release channel. Every name of a lock ends in `}` or in `}` and one of
 * the lock's own suffixes, none of which ends in `:leader` (or in `:leader:fence`,
 * `:leader:released`), so a role never shares a name with a lock of the same key.
 */
export const LEADER_SUFFIX = ':leader';

/**
 * The name each kind of lock keeps its holders under, as a suffix after `<prefix>{<key>}`: the
 * one table the key naming, the listing's SCAN and the inspection scripts read. Every kind holds
 * the lock's own name — its type says which: a string for a mutex (or a writer), a sorted set for
 * a read lock's readers or a semaphore's permits, told apart by the permits' limit key beside
 * them (see `permitLimit`) — so kinds on one name exclude each other by the one key. Only these
 * names end in `}`; every other name of a lock (fence, queue, holder records, limit) ends
 * otherwise, so a listing never mistakes one for a lock.
 */
export const LOCK_NAME_SUFFIXES: Readonly<Record<LockKind, string>> = Object.freeze({
  exclusive: '',
  read: '',
  semaphore: '',
});

/**
 * What a semaphore's companion names (fence counter, limit, holder records, fair queue) add to
 * the lock's name: apart from the mutex's on the same key, which has a fence and queue of its own.
 */
export const PERMIT_NAMES = ':permits';

/** The kinds in the order inspection reports them when one key holds several (see inspect). */
export const LOCK_KINDS: readonly LockKind[] = ['exclusive', 'read', 'semaphore'];

/** The Redis names of one lock, all in one hash slot (the user key is the hash tag). */
export class LockRedisKeys {
  /**
   * Pub/sub channel a release publishes on, to wake waiters at once: one per lock name, shared by
   * every kind, so a release of any kind wakes the waiters of every kind.
   */
  readonly channel: string;
  /**
   * What the kind's own companion names start with: the lock's name, or for a semaphore the
   * lock's name and `PERMIT_NAMES` (its fence counter and fair queue are its own).
   */
  private readonly names: string;

  constructor(
    /**
     * The lease: `SET <lock> <token> NX PX <ttl>` for an exclusive lock; the sorted set a read
     * lock's readers or a semaphore's permits hold (its other names add a suffix to it).
     */
    readonly lock: string,
    /** What a lease on these keys grants; the backend runs that kind's scripts. */
    readonly kind: LeaseKind = EXCLUSIVE,
  ) {
    this.channel = `${lock}:released`;
    this.names = kind.type === 'semaphore' ? `${lock}${PERMIT_NAMES}` : lock;
  }

  /** The fence counter, `INCR`ed on every grant; outlives the lock by `fenceRetention`. */
  get fence(): string {
    return `${this.names}:fence`;
  }

  /** Fair mode: the waiters in arrival order (ZSET). */
  get queue(): string {
    return `${this.names}:queue`;
  }

  /** Fair mode: the waiters' entries (HASH). */
  get waiters(): string {
    return `${this.names}:waiters`;
  }

  /**
   * Fair mode only: who holds the lock, for inspection — `"<since ms> <token> <instance id>"`
   * (STRING), written by the script that hands the lock over, with the lease's own PX, renewed and
   * deleted with it. A plain grant writes none: its token names its holder (`newHolderToken`).
   */
  get holder(): string {
    return `${this.names}:holder`;
  }

  /** Fair mode: each queued waiter's instance id (HASH token → id), so a hand-off names it. */
  get waiterIds(): string {
    return `${this.names}:waiter-ids`;
  }

  /**
   * Read-write locks: who holds each share, for inspection only (HASH token → `"<since ms>
   * <instance id>"`), written by the grant beside the readers (the sorted set token → lease end
   * under `lock` itself, on Redis' clock) with their TTL, pruned with their lapsed shares and
   * deleted with the last one.
   */
  get readerHolders(): string {
    return `${this.lock}:readers:holders`;
  }

  /**
   * Semaphores: who holds each permit, for inspection only (HASH token → `"<since ms> <instance
   * id>"`), kept as `readerHolders` is beside the readers.
   */
  get permitHolders(): string {
    return `${this.lock}${PERMIT_NAMES}:holders`;
  }

  /**
   * Semaphores: the limit N every holder named (STRING). It is what tells a semaphore's permits
   * from a read lock's readers under the lock's name (both sorted sets): it exists exactly while
   * the permits do — written with every grant, given their PEXPIRE, deleted with the last permit
   * — and a reader that starts a new set of readers deletes one left over. Every kind's scripts
   * name it, so each can tell who holds the key.
   */
  get permitLimit(): string {
    return `${this.lock}${PERMIT_NAMES}:limit`;
  }

  /**
   * Read-write locks: the writers waiting for the readers to leave (ZSET call id → when the entry
   * lapses unless refreshed); while one is there, new readers are refused (writer priority).
   */
  get writersWaiting(): string {
    return `${this.lock}:writers-waiting`;
  }
}

/**
 * The SCAN pattern of the names under `prefix` that may be locks (glob characters in the prefix
 * escaped): ending in `}` (a mutex, a writer, readers or permits), so the server already leaves
 * out fence counters, queues, limits and holder records — the fence counters, which outlive their
 * locks by `fenceRetention`, are most of the keys.
 */
export function lockKeyPattern(prefix: string): string {
  return `${escapeGlob(prefix)}{*}`;
}

/** `text` as a literal in a SCAN MATCH pattern: its glob characters escaped. */
export function escapeGlob(text: string): string {
  return text.replace(/[*?[\]\\]/g, (c) => `\\${c}`);
}

/**
 * Which locks `name` (found by `lockKeyPattern`) may hold, by the suffix table: the kinds whose
 * name it is — every kind, as one name holds them all — and the name of its lock
 * `<prefix>{<key>}`; undefined for a lock's other names (fence, queue, limit, holder records).
 * Which kind holds it is the inspection's to read, from the key's type and the permits' limit
 * key beside it (see `permitLimit`). A user key may itself contain `}:permits`: its lock name
 * still ends in `}`.
 */
export function lockNameOf(name: string): { kinds: LockKind[]; base: string } | undefined {
  for (const suffix of new Set(Object.values(LOCK_NAME_SUFFIXES))) {
    if (!name.endsWith(`}${suffix}`)) continue;
    const kinds = LOCK_KINDS.filter((kind) => LOCK_NAME_SUFFIXES[kind] === suffix);
    return { kinds, base: name.slice(0, name.length - suffix.length) };
  }
  return undefined;
}

/**
 * The keys of every kind of lock on the user key whose lock is `base` (`<prefix>{<key>}`): one
 * name, and one hash tag, so one script reaches them all. The semaphore's limit is unknown here:
 * 0.
 */
export function kindKeysOf(base: string): Record<LockKind, LockRedisKeys> {
  const exclusive = new LockRedisKeys(base);
  return {
    exclusive,
    read: new LockRedisKeys(base, { type: 'read' }),
    semaphore: new LockRedisKeys(base, { type: 'semaphore', permits: 0 }),
  };
}

/** The user key of lock key `name` under `prefix` (the inverse of `lockRedisKeys`). */
export function userKeyOf(prefix: string, name: string): string {
  const tag = name.slice(prefix.length + 1, -1);
  return /^\{[{}]/.test(tag) ? tag.slice(1) : tag;
}

/**
 * Names the Redis keys of a lock. The user key sits inside a hash tag so the lease, the fence
 * counter and the channel hash to one Cluster slot (multi-key scripts never hit CROSSSLOT).
 * The key goes in as it is, never escaped again: a key template already escaped its values, and
 * `LockService.acquire(text)` must name the same lock as a template that renders `text`.
 */
export function lockRedisKeys(
  prefix: string,
  key: string,
  kind: LeaseKind = EXCLUSIVE,
): LockRedisKeys {
  const lock = `${prefix}{${hashTagSafe(key)}}`;
  // A role's leadership has names of its own too, in the slot of the key named like the role.
  if (kind.type === 'leader') return new LockRedisKeys(`${lock}${LEADER_SUFFIX}`, kind);
  // Every kind of lock holds the one name: they exclude each other (re-entrancy, which keeps
  // holds by `lock`, refuses a nested call of another kind on a name the chain holds).
  return new LockRedisKeys(lock, kind);
}

/**
 * Redis hashes the text between the first `{` and the first `}` after it, or the whole name when
 * that is empty. The prefix has no braces, so a brace inside the key only shortens the tag, the
 * same for every name of the lock — except a key starting with `}`: its tag would be empty and
 * each name would hash on its own. Such a key gets one more `{` in front (tag `{`), and so does a
 * key starting with `{`, so that `}x` and `{}x` keep distinct names.
 */
function hashTagSafe(key: string): string {
  return key.startsWith('{') || key.startsWith('}') ? `{${key}` : key;
}

/** Rejects keys that would lock nothing useful: not a string, empty, or longer than the limit. */
export function assertLockKey(key: unknown, maxKeyLength: number): asserts key is string {
  if (typeof key !== 'string' || key.length === 0) throw new LockKeyError(messages.emptyKey());
  // A lone surrogate has no UTF-8 form: Redis would store U+FFFD, so distinct keys would collide.
  if (!key.isWellFormed()) throw new LockKeyError(messages.illFormedKey());
  if (key.length > maxKeyLength) {
    throw new LockKeyError(messages.keyTooLong(key.length, maxKeyLength));
  }
}
