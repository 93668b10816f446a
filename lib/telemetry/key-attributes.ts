import { createHash } from 'node:crypto';
import type { TelemetryKeys } from '../options/telemetry-options';

/** The span attributes naming a lock key, as the `telemetry.keys` option allows. */
export function keyAttributes(keys: TelemetryKeys, key: string): Record<string, string> {
  if (keys === 'plain') return { 'lock.key': key };
  if (keys === 'hashed') return { 'lock.key.hash': hashKey(key) };
  return {};
}

/** The first 16 hex digits (64 bits) of the key's SHA-256: tells keys apart, does not show them. */
export function hashKey(key: string): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 16);
}
