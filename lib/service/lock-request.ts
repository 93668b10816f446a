import type { LockEngine } from '../engine/lock-engine';
import type { LockHandle } from '../engine/lock-handle';
import { LockNotAcquiredError } from '../errors/errors';
import { assertLockKey } from '../keys/lock-keys';
import type { AcquireOptions } from '../options/lock-call-options';
import { leaseKindOf } from '../options/permits-option';
import { readWriteRequest } from '../options/read-write-options';
import { assertHoldBounds, assertLease, assertNonNegative } from '../options/resolve-options';
import { multiKeys } from './multi-key-request';

/** All of `keys` or none (`LockNotAcquiredError` names the key still busy). */
/** All of `keys` or none (checked: exclusive, non-empty, duplicates removed). */
export function acquireMany(engine: LockEngine, keys: readonly string[], options: AcquireOptions) {
  const unique = multiKeys(keys, options, engine.options.maxKeyLength);
  const { key: _first, ...request } = lockRequest(engine, unique[0]!, options);
  return engine.acquireMany({ ...request, keys: unique });
}

/** `key`'s lock, or `LockNotAcquiredError` when it stayed busy through the wait. */
export function acquireOne(
  engine: LockEngine,
  key: string,
  options: AcquireOptions,
): Promise<LockHandle> {
  return engine.acquire(lockRequest(engine, key, options), (outcome) => {
    if ('lock' in outcome) return outcome.lock;
    throw new LockNotAcquiredError(key, outcome.waited, outcome.retryAfterMs);
  });
}

/**
 * The engine's request for one key: the call's options over the module's (`engine.options`),
 * checked — the lease against the drift margin of the engine's backend.
 */
export function lockRequest(
  engine: Pick<LockEngine, 'options' | 'drift' | 'assertServes'>,
  key: string,
  options: AcquireOptions,
) {
  const defaults = engine.options;
  assertLockKey(key, defaults.maxKeyLength);
  // The module's defaults were checked when the service was made: only what the call gives is.
  const ttl = options.ttl ?? defaults.ttl;
  const wait = options.wait ?? defaults.wait;
  const maxHold = options.maxHold ?? defaults.maxHold;
  const minHold = options.minHold ?? defaults.minHold;
  if (options.ttl !== undefined) assertLease('ttl', ttl, (ms) => engine.drift(ms));
  if (options.wait !== undefined) assertNonNegative('wait', wait);
  if (options.minHold !== undefined || options.maxHold !== undefined) {
    assertHoldBounds(minHold, maxHold);
  }
  // The kind first: a semaphore refuses read-write options with a message of its own.
  const kind = leaseKindOf(options);
  const { writerPriority } = readWriteRequest(options, defaults);
  engine.assertServes(kind);
  const { renew = true, signal } = options;
  return { key, ttl, wait, maxHold, minHold, renew, signal, kind, writerPriority };
}
