import type { LeaseHolderInfo, ListedLock, LockHolderInfo, LockInfo } from '../backends/lock-info';
import type { EvictedKind, EvictedLock } from '../backends/lock-eviction';
import type { LeaderInfo } from '../service/leader/leader-info';

/** `host:123 since 2026-12-01T08:50:00.000Z`, or a note when the grant wrote no record. */
function holderText(holder: LockHolderInfo | undefined): string {
  if (!holder) return '(unknown: taken by a version without holder records)';
  return `${holder.instanceId} since ${new Date(holder.since).toISOString()}`;
}

/** The holders of a read lock's shares or a semaphore's permits, one a line, numbered. */
function holderLines(holders: readonly LeaseHolderInfo[], count: number): string[] {
  const lines = holders.map(
    (holder, i) => `  ${i + 1}. ${holderText(holder)} (ttl ${holder.ttlMs} ms)`,
  );
  const unknown = count - holders.length;
  if (unknown > 0) lines.push(`  … ${unknown} more taken by a version without holder records`);
  return lines;
}

/** The lines of what only `info`'s kind has: the holder, the readers, or the permits. */
function kindLines(info: LockInfo): string[] {
  if (info.readers) {
    const { count, holders, writersWaiting } = info.readers;
    return [
      `readers: ${count} (writers waiting: ${writersWaiting})`,
      ...holderLines(holders, count),
    ];
  }
  if (info.semaphore) {
    const { count, permits, holders } = info.semaphore;
    return [`permits: ${count} of ${permits} held`, ...holderLines(holders, count)];
  }
  return [`holder:  ${holderText(info.holder)}`];
}

/**
 * One lock, one field a line; a key held by several kinds of lock at once (a read lock and a
 * semaphore) first names them all, then shows each, so nothing `release --force` removes is hidden.
 */
export function formatInfo(key: string, info: LockInfo): string {
  if (!info.held) {
    const queued = info.waiters?.length ? ` (${info.waiters.length} waiter(s) queued)` : '';
    return `${key}: not held${queued}`;
  }
  const kinds = [info, ...(info.others ?? [])];
  if (kinds.length === 1) return kindBlock(key, info);
  const names = `kinds:   ${kinds.map((one) => one.kind).join(', ')}`;
  return [names, ...kinds.map((one) => kindBlock(key, one))].join('\n\n');
}

/** One kind of lock on `key`, one field a line. */
function kindBlock(key: string, info: LockInfo): string {
  const lines = [
    `key:     ${key}`,
    `kind:    ${info.kind}`,
    `ttl:     ${info.ttlMs} ms`,
    `fence:   ${info.fence}`,
    ...kindLines(info),
  ];
  const waiters = info.waiters ?? [];
  lines.push(`waiters: ${waiters.length}`);
  waiters.forEach((waiter, i) => {
    const id = waiter.instanceId ?? '(unknown)';
    lines.push(`  ${i + 1}. ${id} since ${new Date(waiter.since).toISOString()}`);
  });
  return lines.join('\n');
}

/** Every holder record of a lock, whatever its kind. */
function holdersOf(lock: LockInfo): LockHolderInfo[] {
  if (lock.readers) return lock.readers.holders;
  if (lock.semaphore) return lock.semaphore.holders;
  return lock.holder ? [lock.holder] : [];
}

/** HOLDERS: 1 for a mutex, the readers for a read lock, `held/limit` for a semaphore. */
function holderCount(lock: LockInfo): string {
  if (lock.readers) return String(lock.readers.count);
  if (lock.semaphore) return `${lock.semaphore.count}/${lock.semaphore.permits}`;
  return '1';
}

/**
 * A table: key, kind, holder count, ttl, fence, holder (the instance ids holding it, each once),
 * since (the earliest grant among them), waiters.
 */
export function formatListing(locks: readonly ListedLock[]): string {
  if (locks.length === 0) return 'No locks held.';
  const rows = [['KEY', 'KIND', 'HOLDERS', 'TTL_MS', 'FENCE', 'HOLDER', 'SINCE', 'WAITERS']];
  for (const lock of locks) {
    const holders = holdersOf(lock);
    const since = Math.min(...holders.map((holder) => holder.since));
    rows.push([
      lock.key,
      lock.kind ?? '',
      holderCount(lock),
      String(lock.ttlMs ?? ''),
      String(lock.fence ?? ''),
      holders.length > 0 ? [...new Set(holders.map((h) => h.instanceId))].join(',') : '-',
      holders.length > 0 ? new Date(since).toISOString() : '-',
      String(lock.waiters?.length ?? 0),
    ]);
  }
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
  return rows
    .map((row) =>
      row
        .map((cell, column) => cell.padEnd(widths[column]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** `a, b, 1 without a record`: the holders named by their records, and how many had none. */
function evictedHolders({ count, holders }: EvictedKind<LockHolderInfo>): string {
  const names = holders.map((holder) => holder.instanceId);
  if (count > holders.length) names.push(`${count - holders.length} without a record`);
  return names.join(', ');
}

/** What `release --force` removed: one line per kind, as `inspect` orders them. */
export function formatEvicted(key: string, evicted: EvictedLock | null): string {
  if (!evicted) return `${key}: not held, nothing removed.`;
  const lines: string[] = [];
  const { exclusive, read, semaphore } = evicted.removed;
  if (exclusive) {
    lines.push(
      `Released ${key}: holder ${holderText(exclusive.holders[0])}, fence ${exclusive.fence}.`,
    );
  }
  for (const [kind, removed] of [
    ['read', read],
    ['semaphore', semaphore],
  ] as const) {
    if (!removed) continue;
    lines.push(
      `Released ${key}: ${kind}, ${removed.count} holder(s) (${evictedHolders(removed)}), ` +
        `fence ${removed.fence}.`,
    );
  }
  return lines.join('\n');
}

/** Who leads a role: the leader and since when, the term, the lease left, the followers waiting. */
export function formatLeader(info: LeaderInfo): string {
  const lines = [`role:      ${info.role}`];
  if (info.led) {
    lines.push(`leader:    ${holderText(info.leader)}`, `lease:     ${info.leaseLeftMs} ms left`);
  } else {
    lines.push('leader:    none');
  }
  lines.push(`term:      ${info.term}${info.led ? '' : ' (the last one kept)'}`);
  lines.push(`followers: ${info.followers} process(es) waiting`);
  return lines.join('\n');
}
