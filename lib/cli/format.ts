import type { EvictedLock, ListedLock, LockHolderInfo, LockInfo } from '../backends/lock-info';

/** `host:123 since 2026-12-01T08:50:00.000Z`, or a note when the grant wrote no record. */
function holderText(holder: LockHolderInfo | undefined): string {
  if (!holder) return '(unknown: taken by a version without holder records)';
  return `${holder.instanceId} since ${new Date(holder.since).toISOString()}`;
}

/** One lock, one field a line. */
export function formatInfo(key: string, info: LockInfo): string {
  if (!info.held) {
    const queued = info.waiters?.length ? ` (${info.waiters.length} waiter(s) queued)` : '';
    return `${key}: not held${queued}`;
  }
  const lines = [
    `key:     ${key}`,
    `ttl:     ${info.ttlMs} ms`,
    `fence:   ${info.fence}`,
    `holder:  ${holderText(info.holder)}`,
  ];
  const waiters = info.waiters ?? [];
  lines.push(`waiters: ${waiters.length}`);
  waiters.forEach((waiter, i) => {
    const id = waiter.instanceId ?? '(unknown)';
    lines.push(`  ${i + 1}. ${id} since ${new Date(waiter.since).toISOString()}`);
  });
  return lines.join('\n');
}

/** A table: key, ttl, fence, holder, since, waiters. */
export function formatListing(locks: readonly ListedLock[]): string {
  if (locks.length === 0) return 'No locks held.';
  const rows = [['KEY', 'TTL_MS', 'FENCE', 'HOLDER', 'SINCE', 'WAITERS']];
  for (const lock of locks) {
    rows.push([
      lock.key,
      String(lock.ttlMs ?? ''),
      String(lock.fence ?? ''),
      lock.holder?.instanceId ?? '-',
      lock.holder ? new Date(lock.holder.since).toISOString() : '-',
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

/** What `release --force` removed. */
export function formatEvicted(key: string, evicted: EvictedLock | null): string {
  if (!evicted) return `${key}: not held, nothing removed.`;
  return `Released ${key}: holder ${holderText(evicted.holder)}, fence ${evicted.fence}.`;
}
