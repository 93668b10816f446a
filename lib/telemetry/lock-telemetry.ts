import type { TelemetryKeys } from '../options/telemetry-options';
import { LockMetrics } from './lock-metrics';
import { LockSpans } from './lock-spans';
import type { LockMode } from './lock-mode';
import { otelApi } from './otel-api';

/**
 * The OpenTelemetry instrumentation of one LockService, or nothing of it without the API. Its
 * members are internal: the published declarations must not need `@opentelemetry/api`'s types,
 * an optional peer that a user without telemetry does not install.
 */
export interface LockTelemetry {
  /** @internal */
  readonly metrics?: LockMetrics;
  /** @internal */
  readonly spans?: LockSpans;
}

/** Metrics and spans through `@opentelemetry/api` when it is installed; none otherwise. */
export function createTelemetry(mode: LockMode, keys: TelemetryKeys): LockTelemetry {
  const api = otelApi();
  if (!api) return {};
  const version = libraryVersion();
  return {
    metrics: new LockMetrics(api, version, mode),
    spans: new LockSpans(api, version, mode, keys),
  };
}

/** This library's version, the instrumentation scope's version. */
function libraryVersion(): string {
  try {
    // Two levels up from lib/telemetry (or dist/telemetry): the package root.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return (require('../../package.json') as { version: string }).version;
  } catch {
    return 'unknown';
  }
}
