import { randomBytes } from 'node:crypto';

export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

/** Unique per run: the shared Redis may hold other runs' keys; ours are deleted at the end. */
export const PREFIX = `nrl-compat-esm:${process.pid}-${randomBytes(4).toString('hex')}:`;

/** How long a locked method works: long enough for a concurrent call to find the lock held. */
export const HOLD_MS = 200;
