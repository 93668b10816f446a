/**
 * Messages of semaphores (`permits`), kept apart from the main catalogue: each one says what to do.
 */
export const semaphoreMessages = {
  limitConflict: (lock: string, held: number, asked: number) =>
    `Semaphore ${lock} is held with permits: ${held}, and this call asks for permits: ${asked}. ` +
    'Every holder of one semaphore key must name the same `permits`: change the call (or use a ' +
    'different key), or roll the new limit out once no holder of the old one is left — the limit ' +
    'resets when the last permit is released or expires.',
  nestedLimitConflict: (key: string, held: number, asked: number) =>
    `A call nested in a holder of semaphore "${key}" (permits: ${held}) asks for permits: ` +
    `${asked}. A nested call re-uses the permit its caller holds, so it must name the same ` +
    '`permits`: pass the same number, or `reentrant: false` to wait for a permit of its own.',
  notWithReadWrite: (option: string) =>
    `\`permits\` and \`${option}\` do not go together: that is an option of read-write locks, and ` +
    'a semaphore has no readers or writers (its permits are all alike). Drop it for a semaphore ' +
    'of N permits, or drop `permits` for a read-write lock.',
  redlock: () =>
    'Semaphores (`permits`) need one Redis or a Cluster: a Redlock quorum cannot count the ' +
    'holders of a key across independent nodes. Drop `permits` on Redlock, or use a ' +
    'single-node/Cluster LockService for semaphores.',
};
