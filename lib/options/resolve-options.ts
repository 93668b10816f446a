import {
  clockDrift,
  isUsableLease,
  MAX_TIMER_MS,
  REDLOCK_DRIFT_FACTOR,
  redlockDrift,
  shortestLease,
} from '../util/clock';
import { messages, readWriteMessages } from '../errors/messages';
import { RedisLockConfigError } from '../errors/errors';
import { assertRedisUrl } from '../redis/redis-client';
import { assertKnownOptions } from './known-options';
import {
  CLUSTER_OPTION_NAMES,
  DEFAULT_OPTIONS,
  OPTION_ALIASES,
  OPTION_NAMES,
  REDLOCK_OPTION_NAMES,
  REPLICA_ACK_OPTION_NAMES,
} from './option-defaults';
import { resolveTelemetry } from './telemetry-options';
import type { RedisLockModuleOptions, ResolvedRedisLockOptions } from './redis-lock-options';

/**
 * Merges defaults and rejects bad values at startup, with a message that names the option. The
 * one path of `forRoot`, `forRootAsync` (the factory's result) and `new LockService()`. What the
 * chosen store cannot serve (`fair` on Redlock, `replicaAck` on a Cluster) its capabilities refuse
 * next, before it connects (`assertServesOptions`).
 */
export function resolveOptions(options: RedisLockModuleOptions = {}): ResolvedRedisLockOptions {
  if (typeof options === 'object' && options !== null) {
    assertKnownOptions('RedisLockModule', options, OPTION_NAMES, OPTION_ALIASES);
  }
  const defined = Object.fromEntries(
    Object.entries(options).filter(([, value]) => value !== undefined),
  ) as RedisLockModuleOptions;
  const resolved: ResolvedRedisLockOptions = { ...DEFAULT_OPTIONS, ...defined };

  validateTopology(resolved);
  if (typeof resolved.redis === 'string') assertRedisUrl(resolved.redis);
  else if (typeof resolved.redis !== 'object' || resolved.redis === null) {
    throw new RedisLockConfigError(
      messages.badOption('redis', resolved.redis, 'a URL, ioredis options or a client'),
    );
  }
  if (
    typeof resolved.prefix !== 'string' ||
    resolved.prefix.length === 0 ||
    /[{}]/.test(resolved.prefix)
  ) {
    throw new RedisLockConfigError(
      messages.badOption(
        'prefix',
        resolved.prefix,
        'a non-empty string without { or } (the key is the hash tag)',
      ),
    );
  }
  assertLease('ttl', resolved.ttl, driftOf(resolved));
  assertHoldBounds(resolved.minHold, resolved.maxHold);
  assertNonNegative('wait', resolved.wait);
  assertNonNegative('retryJitter', resolved.retryJitter);
  assertPositive('maxKeyLength', resolved.maxKeyLength);
  assertPositive('commandTimeout', resolved.commandTimeout);
  assertNonNegative('fenceRetention', resolved.fenceRetention);
  assertNonNegative('shutdownGrace', resolved.shutdownGrace);
  assertOneOf('startupCheck', resolved.startupCheck, ['warn', 'fail', 'off']);
  assertWholeNumber(
    'startupRetries',
    resolved.startupRetries,
    0,
    100,
    'a whole number from 0 to 100',
  );
  assertOneOf('onBusy', resolved.onBusy, ['throw', 'skip']);
  assertOneOf('onLost', resolved.onLost, ['throw', 'log']);
  assertInstanceId(resolved.instanceId);
  if (typeof resolved.fair !== 'boolean') {
    throw new RedisLockConfigError(messages.badOption('fair', resolved.fair, 'a boolean'));
  }
  assertWriterPriority(resolved);
  if (typeof resolved.reentrant !== 'boolean') {
    throw new RedisLockConfigError(
      messages.badOption('reentrant', resolved.reentrant, 'a boolean'),
    );
  }
  assertWholeNumber('busyStatus', resolved.busyStatus, 400, 599, 'an HTTP error status (400-599)');
  assertOneOf('errorDetails', resolved.errorDetails, ['safe', 'detailed']);
  if (resolved.busyLogLevel !== false) {
    assertOneOf('busyLogLevel', resolved.busyLogLevel, ['verbose', 'debug', 'log', 'warn']);
  }
  if (typeof resolved.answerLockErrors !== 'boolean') {
    throw new RedisLockConfigError(
      messages.badOption('answerLockErrors', resolved.answerLockErrors, 'a boolean'),
    );
  }
  if (resolved.exceptionFactory !== undefined && typeof resolved.exceptionFactory !== 'function') {
    throw new RedisLockConfigError(
      messages.badOption('exceptionFactory', resolved.exceptionFactory, 'a function'),
    );
  }
  resolved.telemetry = resolveTelemetry(resolved.telemetry);
  // Each entry is checked where its campaign is set up (LockService), against the store's drift.
  if (!Array.isArray(resolved.leaders)) {
    throw new RedisLockConfigError(
      messages.badOption('leaders', resolved.leaders, 'an array of roles'),
    );
  }
  return resolved;
}

function validateTopology(resolved: ResolvedRedisLockOptions): void {
  const { cluster, redlock, replicaAck } = resolved;
  const nested: [string, unknown, object][] = [
    ['cluster', cluster, CLUSTER_OPTION_NAMES],
    ['redlock', redlock, REDLOCK_OPTION_NAMES],
    ['replicaAck', replicaAck, REPLICA_ACK_OPTION_NAMES],
  ];
  for (const [name, value, known] of nested) {
    if (typeof value === 'object' && value !== null) {
      assertKnownOptions(`RedisLockModule option \`${name}\``, value, known);
    }
  }
  if (cluster && redlock) {
    throw new RedisLockConfigError(
      messages.badOption('cluster', 'set together with redlock', 'one of them'),
    );
  }
  if (cluster && (!Array.isArray(cluster.nodes) || cluster.nodes.length === 0)) {
    throw new RedisLockConfigError(
      messages.badOption('cluster.nodes', cluster.nodes, 'a non-empty array'),
    );
  }
  if (redlock) {
    if (!Array.isArray(redlock.nodes) || redlock.nodes.length < 3) {
      throw new RedisLockConfigError(
        messages.badOption('redlock.nodes', redlock.nodes, 'an array of at least 3 nodes'),
      );
    }
    redlock.nodes.forEach((node) => typeof node === 'string' && assertRedisUrl(node));
    if (redlock.nodeTimeout !== undefined)
      assertPositive('redlock.nodeTimeout', redlock.nodeTimeout);
    if (redlock.driftFactor !== undefined) {
      assertNonNegative('redlock.driftFactor', redlock.driftFactor);
      // A margin of the whole lease or more would leave no lease any time to be held.
      if (redlock.driftFactor >= 1) {
        throw new RedisLockConfigError(
          messages.badOption('redlock.driftFactor', redlock.driftFactor, 'a number >= 0 and < 1'),
        );
      }
    }
    if (redlock.restartGrace !== undefined) {
      assertNonNegative('redlock.restartGrace', redlock.restartGrace);
    }
  }
  if (replicaAck) {
    if (!Number.isInteger(replicaAck.minReplicas) || replicaAck.minReplicas < 1) {
      throw new RedisLockConfigError(
        messages.badOption('replicaAck.minReplicas', replicaAck.minReplicas, 'an integer >= 1'),
      );
    }
    assertPositive('replicaAck.timeout', replicaAck.timeout);
    // WAIT takes whole milliseconds: a fraction would fail every grant, not the startup.
    if (!Number.isInteger(replicaAck.timeout)) {
      throw new RedisLockConfigError(
        messages.badOption('replicaAck.timeout', replicaAck.timeout, 'an integer number of ms'),
      );
    }
  }
}

/**
 * Read-write locks' module default: a boolean, and on in fair mode (off, it would keep every call
 * out of the queue; a write call may still turn it off for itself).
 */
function assertWriterPriority(resolved: ResolvedRedisLockOptions): void {
  if (typeof resolved.writerPriority !== 'boolean') {
    throw new RedisLockConfigError(
      messages.badOption('writerPriority', resolved.writerPriority, 'a boolean'),
    );
  }
  if (!resolved.writerPriority && resolved.fair) {
    throw new RedisLockConfigError(readWriteMessages.priorityOffInFairMode());
  }
}

export { MAX_TIMER_MS };

/** The drift margin (ms) the backend the options describe keeps off a lease of `ttl` ms. */
function driftOf(resolved: ResolvedRedisLockOptions): (ttl: number) => number {
  const factor = resolved.redlock ? (resolved.redlock.driftFactor ?? REDLOCK_DRIFT_FACTOR) : 0;
  return resolved.redlock ? (ttl) => redlockDrift(ttl, factor) : clockDrift;
}

/**
 * A lease: a whole number of ms that leaves time once the drift margin `drift` (one Redis's by
 * default) is taken off, and that a timer can wait. The message names the shortest one.
 */
export function assertLease(
  name: string,
  value: unknown,
  drift: (ttl: number) => number = clockDrift,
): asserts value is number {
  assertPositive(name, value);
  if (!isUsableLease(value, drift)) {
    throw new RedisLockConfigError(
      messages.leaseTooShort(name, value, shortestLease(drift), MAX_TIMER_MS),
    );
  }
}

export function assertPositive(name: string, value: unknown): asserts value is number {
  if (typeof value !== 'number' || !(value > 0 && value <= MAX_TIMER_MS)) {
    throw new RedisLockConfigError(
      messages.badOption(name, value, `a number > 0 and <= ${MAX_TIMER_MS} (ms)`),
    );
  }
}

/** A duration a timer can wait, or `Infinity` for "no bound". */
export function assertMaxHold(name: string, value: unknown): asserts value is number {
  if (value !== Infinity) assertPositive(name, value);
}

/**
 * `minHold` and `maxHold` of one lock, each valid and the minimum no longer than the maximum — a
 * lock kept after its work never outlives its `maxHold`.
 */
export function assertHoldBounds(minHold: unknown, maxHold: unknown): void {
  assertNonNegative('minHold', minHold);
  assertMaxHold('maxHold', maxHold);
  if (minHold > maxHold) {
    throw new RedisLockConfigError(messages.minHoldOverMaxHold(minHold, maxHold));
  }
}

export function assertNonNegative(name: string, value: unknown): asserts value is number {
  if (typeof value !== 'number' || !(value >= 0 && value <= MAX_TIMER_MS)) {
    throw new RedisLockConfigError(
      messages.badOption(name, value, `a number >= 0 and <= ${MAX_TIMER_MS} (ms)`),
    );
  }
}

/** A whole number from `min` to `max`; `expected` says so in the refusal. */
function assertWholeNumber(
  name: string,
  value: unknown,
  min: number,
  max: number,
  expected: string,
): void {
  if (!Number.isInteger(value) || (value as number) < min || (value as number) > max) {
    throw new RedisLockConfigError(messages.badOption(name, value, expected));
  }
}

export function assertOneOf(name: string, value: unknown, allowed: string[]): void {
  if (typeof value !== 'string' || !allowed.includes(value)) {
    throw new RedisLockConfigError(
      messages.badOption(name, value, allowed.map((a) => `'${a}'`).join(' or ')),
    );
  }
}

/**
 * The instance id is written into holder records as it is, read back up to the end of the record:
 * any non-empty text, within a bound that keeps the record small next to its lease.
 */
function assertInstanceId(value: unknown): void {
  if (typeof value !== 'string' || value.length === 0 || value.length > 256) {
    throw new RedisLockConfigError(
      messages.badOption('instanceId', value, 'a non-empty string of at most 256 characters'),
    );
  }
}
