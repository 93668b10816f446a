import { RedisLockConfigError } from '../errors/errors';
import { messages } from '../errors/messages';
import { assertKnownOptions, type OptionNames } from './known-options';

/**
 * Whether OpenTelemetry spans carry the lock key. Keys hold user data (e-mails, user ids), so
 * none is the default. `'hashed'`: `lock.key.hash`, the first 16 hex digits of the key's SHA-256
 * (it tells keys apart; a guessable key can still be found by hashing guesses). `'plain'`:
 * `lock.key`, the key as given. Metrics never carry the key: one series per key would be unbounded.
 */
export type TelemetryKeys = 'none' | 'hashed' | 'plain';

/** Options of the OpenTelemetry instrumentation (active only when an OpenTelemetry SDK is registered). */
export interface TelemetryOptions {
  /**
   * Whether spans carry the lock key, and how: see `TelemetryKeys`.
   * @default 'none'
   */
  keys?: TelemetryKeys;
}

const TELEMETRY_OPTION_NAMES: OptionNames<TelemetryOptions> = { keys: true };

/** The telemetry options with defaults filled in; rejects unknown names and bad values. */
export function resolveTelemetry(value: unknown): Required<TelemetryOptions> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new RedisLockConfigError(messages.badOption('telemetry', value, 'an object'));
  }
  assertKnownOptions('RedisLockModule option `telemetry`', value, TELEMETRY_OPTION_NAMES);
  const { keys = 'none' } = value as TelemetryOptions;
  if (keys !== 'none' && keys !== 'hashed' && keys !== 'plain') {
    throw new RedisLockConfigError(
      messages.badOption('telemetry.keys', keys, "'none' or 'hashed' or 'plain'"),
    );
  }
  return { keys };
}
