/** How locks are taken: one Redis (or a Cluster), fair queueing, or Redlock over several primaries. */
export type LockMode = 'default' | 'fair' | 'redlock';
