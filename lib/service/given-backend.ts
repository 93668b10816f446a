import type { EngineBackend } from '../engine/lock-engine';

/** The backend the LockService under construction runs on, set by `withGivenBackend()` only. */
let given: EngineBackend | undefined;

/** Read by the LockService constructor: undefined (its own connection) unless given one. */
export function givenBackend(): EngineBackend | undefined {
  return given;
}

/**
 * Runs `create`, whose LockService then runs on `backend` instead of the connection its options
 * name: the seam the testing module builds its in-memory service with. Not part of the public API
 * (the package exports neither it nor this file). @internal
 */
export function withGivenBackend<T>(backend: EngineBackend, create: () => T): T {
  given = backend;
  try {
    return create();
  } finally {
    given = undefined;
  }
}
