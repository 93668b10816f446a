import type { MemoryKindTwin } from '../kind-leases';
import type { LockRedisKeys } from '../../keys/lock-keys';
import type { AcquireTry } from '../../backends/lock-backend';
import type { LockHolderInfo, RawHolders } from '../../backends/lock-info';
import type { MemoryKeyspace } from '../../backends/memory-keyspace';
import type { MemoryPubSubHub } from '../../backends/memory-pubsub';

/** Entries with a deadline each (readers' shares, waiting writers), and the key's own expiry. */
interface Deadlines {
  entries: Map<string, number>;
  expiresAt: number;
  /** Readers: who holds each share (the scripts' holder-record hash, which lives as the set). */
  holders: Map<string, LockHolderInfo>;
}

/**
 * Read-write locks in the in-memory backend, as the Lua scripts keep them on Redis: the readers'
 * shares (token → lease end) under the lock's name — refused while a writer or a semaphore's
 * permits hold it — the writers waiting (call id → entry end), each set living as
 * long as its latest entry. An entry lapses in the millisecond its deadline is reached, as the
 * scripts' `ZREMRANGEBYSCORE -inf now` drops it.
 */
export class MemoryReadLeases implements MemoryKindTwin {
  private readonly readers = new Map<string, Deadlines>();
  private readonly writers = new Map<string, Deadlines>();

  constructor(
    private readonly keys: MemoryKeyspace,
    private readonly hub: MemoryPubSubHub,
    /** Written as the holder of each share granted. */
    private readonly instanceId: string,
  ) {
    keys.holdsShares('read', (name) => this.until(name));
  }

  /** A reader's try: the fence counter as it stands, or -(ms until worth trying again). */
  acquire(keys: LockRedisKeys, token: string, ttl: number): number {
    const now = this.keys.now();
    const mine = this.live(this.readers, keys.lock).get(token);
    if (!(mine !== undefined && mine > now)) {
      const writer = this.keys.lease(keys);
      if (writer) return -this.keys.refusedBy(writer);
      // A semaphore's permits hold the name: until the last of them ends (0: in this ms).
      const permitsUntil = this.keys.sharesUntil(keys.lock, 'read');
      if (permitsUntil !== undefined) return now - permitsUntil;
      const waiting = this.latest(this.writers, keys.writersWaiting);
      if (waiting !== undefined) return -(waiting - now);
      const queue = this.keys.queue(keys);
      if (queue) return -Math.max(1, this.keys.pttlOf(queue));
      this.latest(this.readers, keys.lock); // lapsed shares go, their records with them
    }
    this.put(this.readers, keys.lock, token, now + ttl, ttl);
    const holders = this.readers.get(keys.lock)!.holders;
    // A re-sent grant keeps its record (HSETNX).
    if (!holders.has(token)) holders.set(token, { instanceId: this.instanceId, since: Date.now() });
    return this.keys.readFence(keys, ttl);
  }

  /**
   * Until when (keyspace clock) the readers hold `name` as another kind sees them: the latest
   * lease end not before now (a share counts through its last ms there), none dropped.
   */
  private until(name: string): number | undefined {
    const ends = [...this.live(this.readers, name).values()];
    const last = Math.max(...ends);
    return ends.length > 0 && last >= this.keys.now() ? last : undefined;
  }

  /**
   * A writer refused (by readers, or by another writer while it waits): enters or refreshes its
   * entry when it will wait with priority, and says how long until its next try is due.
   */
  refused(keys: LockRedisKeys, retry: number, how: AcquireTry | undefined, byReaders: boolean) {
    const writer = how?.waitingWriter;
    const entries = this.live(this.writers, keys.writersWaiting);
    if (!writer || !(byReaders || entries.has(writer.id))) return retry > 0 ? -retry : 0;
    const now = this.keys.now();
    this.put(this.writers, keys.writersWaiting, writer.id, now + writer.entryMs, writer.entryMs);
    writer.entered();
    const due = Math.min(retry, Math.floor(writer.entryMs / 3));
    return due > 0 ? -due : 0;
  }

  /** A writer was granted the key: it no longer waits. */
  /** Whether the writer granted had waited among the writers waiting (and so held readers back). */
  granted(keys: LockRedisKeys, how: AcquireTry | undefined): boolean {
    const id = how?.waitingWriter?.id;
    return id !== undefined && this.remove(this.writers, keys.writersWaiting, id);
  }

  extend(keys: LockRedisKeys, token: string, ms: number): boolean {
    const now = this.keys.now();
    const share = this.live(this.readers, keys.lock).get(token);
    if (share === undefined) return false;
    if (share <= now) {
      this.remove(this.readers, keys.lock, token);
      return false;
    }
    this.put(this.readers, keys.lock, token, now + ms, ms);
    this.keys.readFence(keys, ms);
    return true;
  }

  release(keys: LockRedisKeys, token: string): boolean {
    const share = this.live(this.readers, keys.lock).get(token);
    if (share === undefined) return false;
    this.remove(this.readers, keys.lock, token);
    if (this.latest(this.readers, keys.lock) === undefined) {
      this.hub.publish(keys.channel, `wake-all:${token}`);
    }
    return share > this.keys.now();
  }

  /** The live readers, the soonest lease end first, as the inspect script reads them. */
  readersRaw(keys: LockRedisKeys): RawHolders {
    const now = this.keys.now();
    const set = this.readers.get(keys.lock);
    return [...this.live(this.readers, keys.lock)]
      .filter(([, deadline]) => deadline > now)
      .sort(([a, x], [b, y]) => x - y || (a < b ? -1 : 1))
      .flatMap(([token, deadline]) => {
        const holder = set?.holders.get(token);
        return [Math.ceil(deadline - now), holder ? `${holder.since} ${holder.instanceId}` : null];
      });
  }

  /** How many writers wait for the readers now (live entries). */
  writersWaiting(keys: LockRedisKeys): number {
    const now = this.keys.now();
    return [...this.live(this.writers, keys.writersWaiting).values()].filter((at) => at > now)
      .length;
  }

  /** The names of the readers' sets that have a live share (what SCAN would find). */
  readerNames(): string[] {
    return [...this.readers.keys()].filter((name) => this.latest(this.readers, name) !== undefined);
  }

  /** A forced release: every share goes, records too; all waiters wake. What it removed. */
  evict(keys: LockRedisKeys): RawHolders {
    const removed = this.readersRaw(keys);
    this.readers.delete(keys.lock);
    if (removed.length > 0) this.hub.publish(keys.channel, 'wake-all:force-release');
    return removed;
  }

  leaveWriters(keys: LockRedisKeys, id: string): void {
    if (!this.live(this.writers, keys.writersWaiting).has(id)) return;
    this.remove(this.writers, keys.writersWaiting, id);
    this.hub.publish(keys.channel, `wake-all:${id}`);
  }

  /** The entries under `name`, none when the set expired (deleted on the way). */
  private live(sets: Map<string, Deadlines>, name: string): Map<string, number> {
    const set = sets.get(name);
    if (set && this.keys.now() > set.expiresAt) sets.delete(name);
    return sets.get(name)?.entries ?? new Map<string, number>();
  }

  /** Drops the lapsed entries under `name`; the latest deadline left, if any. */
  private latest(sets: Map<string, Deadlines>, name: string): number | undefined {
    const now = this.keys.now();
    let latest: number | undefined;
    for (const [member, deadline] of this.live(sets, name)) {
      if (deadline <= now) this.remove(sets, name, member);
      else latest = Math.max(latest ?? deadline, deadline);
    }
    return latest;
  }

  /** ZADD, and the set lives at least `ms` more (never shortened). */
  private put(sets: Map<string, Deadlines>, name: string, member: string, at: number, ms: number) {
    const now = this.keys.now();
    this.live(sets, name);
    const set = sets.get(name) ?? {
      entries: new Map<string, number>(),
      expiresAt: now + ms,
      holders: new Map<string, LockHolderInfo>(),
    };
    set.entries.set(member, at);
    set.expiresAt = Math.max(set.expiresAt, now + ms);
    sets.set(name, set);
  }

  /** ZREM; Redis deletes an emptied set. */
  /** Whether `member` was there. */
  private remove(sets: Map<string, Deadlines>, name: string, member: string): boolean {
    const set = sets.get(name);
    const was = set?.entries.delete(member) ?? false;
    set?.holders.delete(member);
    if (set?.entries.size === 0) sets.delete(name);
    return was;
  }
}
