import { messages, readWriteMessages } from '../errors/messages';
import { RedisLockConfigError } from '../errors/errors';
import { EXCLUSIVE, READ, type LeaseKind } from '../keys/lease-kind';

/**
 * How a read-write lock is held: `'read'` — a share, many readers at once, never beside a writer —
 * or `'write'`: the key alone (the plain lock, and the default).
 */
export type ReadWriteMode = 'read' | 'write';

/** The read-write options of one lock call (`mode`, `writerPriority`), as calls give them. */
export interface ReadWriteCallOptions {
  mode?: ReadWriteMode;
  writerPriority?: boolean;
}

/** Checks a call's (or a decorator's) read-write options on their own; throws a config error. */
export function assertReadWriteOptions(options: ReadWriteCallOptions): void {
  const { mode, writerPriority } = options;
  if (mode !== undefined && mode !== 'read' && mode !== 'write') {
    throw new RedisLockConfigError(messages.badOption('mode', mode, "'read' or 'write'"));
  }
  if (writerPriority !== undefined && typeof writerPriority !== 'boolean') {
    throw new RedisLockConfigError(
      messages.badOption('writerPriority', writerPriority, 'a boolean'),
    );
  }
  if (mode === 'read' && writerPriority !== undefined) {
    throw new RedisLockConfigError(readWriteMessages.priorityOnRead());
  }
}

/**
 * What a lock call asks for: the kind of lease, and (writers) whether waiting holds back new
 * readers (in fair mode: whether it queues). Whether the store serves read locks at all is its
 * capabilities' question (`assertServesKind`).
 */
export function readWriteRequest(
  options: ReadWriteCallOptions,
  module: { readonly writerPriority: boolean },
): { kind: LeaseKind; writerPriority: boolean } {
  assertReadWriteOptions(options);
  if (options.mode === 'read') {
    return { kind: READ, writerPriority: module.writerPriority };
  }
  return { kind: EXCLUSIVE, writerPriority: options.writerPriority ?? module.writerPriority };
}
