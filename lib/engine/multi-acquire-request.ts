import type { AcquireRequest } from './acquire-request';
import type { MultiLock } from './multi-lock';

/** One multi-key acquisition: every key, exclusive, validated and without duplicates. */
export interface MultiAcquireRequest extends Omit<AcquireRequest, 'key' | 'kind'> {
  readonly keys: readonly string[];
}

/** All the keys held, or which key was still busy when the budget ran out. */
export type MultiAcquireOutcome =
  | { lock: MultiLock }
  | { retryAfterMs: number; waited: number; busyKey: string; keys: readonly string[] };
