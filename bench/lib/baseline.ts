/**
 * The published figures a run is judged against where the issue asks for "at least the current
 * figures" (read locks, semaphore permits): read from a published results JSON before this run
 * overwrites it, and kept in the new results, so the report says which run they came from.
 */
import { existsSync, readFileSync } from 'node:fs';
import { relative } from 'node:path';
import type { ReadLockResult } from './read-lock';
import type { SemaphoreResults } from './semaphore';

export interface Baseline {
  /** Where the figures were read from, relative to the repository. */
  source: string;
  /** The published run's date, commit and machine. */
  date: string;
  commit: string;
  cpu: string;
  /** RW: 16 loops on one key in `mode: 'read'`, ops/s (median), and how long each run lasted. */
  readOpsPerSec?: number;
  readMs?: number;
  /** SEM: ours with `permits: 3`, 16 loops on one key, ops/s (median), and the run's length. */
  permitsOpsPerSec?: number;
  permitsMs?: number;
  /** S1 and S2 ops/s (medians) of ours as a read lock and as a permit, once a run has them. */
  kinds?: Partial<Record<'ours:read' | 'ours:permits', { s1?: number; s2?: number }>>;
}

interface Published {
  meta: { date: string; commit: string; cpu: string; config: Record<string, number> };
  s1?: Record<string, { median: { opsPerSec: number } }>;
  s2?: Record<string, { median: { opsPerSec: number } }>;
  rw?: ReadLockResult;
  sem?: SemaphoreResults;
}

/** The figures of the run at `path`, or undefined when there is no such file. */
export function readBaseline(path: string, root: string): Baseline | undefined {
  if (!existsSync(path)) return undefined;
  const published = JSON.parse(readFileSync(path, 'utf8')) as Published;
  return {
    source: relative(root, path),
    date: published.meta.date,
    commit: published.meta.commit,
    cpu: published.meta.cpu,
    readOpsPerSec: published.rw?.read.opsPerSec,
    readMs: published.rw?.ms,
    permitsOpsPerSec: published.sem?.ours?.median.opsPerSec,
    // SEM's length was not recorded before it became a setting; it was 2 s then.
    permitsMs: published.meta.config.semMs ?? 2_000,
    kinds: Object.fromEntries(
      (['ours:read', 'ours:permits'] as const).map((id) => [
        id,
        { s1: published.s1?.[id]?.median.opsPerSec, s2: published.s2?.[id]?.median.opsPerSec },
      ]),
    ),
  };
}
