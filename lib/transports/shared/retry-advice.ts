/**
 * How long a client is told to wait on a busy lock. The holder's PTTL is only an upper bound (a
 * renewed lease always shows about `ttl`) and most locked work is short, so the advice is the
 * smallest value: HTTP's `Retry-After` in seconds, GraphQL's `retryAfterMs` by default.
 */
export const RETRY_AFTER_SECONDS = 1;
export const RETRY_AFTER_MS = RETRY_AFTER_SECONDS * 1_000;
