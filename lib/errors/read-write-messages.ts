/** Messages of read-write locks, for developers (errors); each says what to do next. */
export const readWriteMessages = {
  upgrade: (key: string) =>
    `Lock "${key}" is held for reading by this call chain, which now asks to write it: a write ` +
    'lock waits for every reader to leave, this one included, so it would wait for itself. ' +
    "Take the write lock (mode 'write', the default) in the outer call instead, or release the " +
    'read lock before writing.',
  priorityOnRead: () =>
    "Lock option `writerPriority` applies to writers (mode 'write'): it says whether a writer " +
    'waiting for readers holds back new readers. Leave it out of read locks.',
  priorityOffInFairMode: () =>
    'Lock option `writerPriority: false` does not go with `fair: true`: in fair mode writers ' +
    'queue first come, first served, and new readers always wait behind a queued writer. Leave ' +
    '`writerPriority` out, or turn `fair` off.',
  redlock: () =>
    "Read locks (mode 'read') are not available with `redlock`: a reader's share would need its " +
    'own quorum, which Redlock mode does not keep. Use one Redis (or a Cluster) for read-write ' +
    'locks, or an exclusive lock.',
};
