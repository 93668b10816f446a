import type * as OtelApi from '@opentelemetry/api';

/** The OpenTelemetry API module, as this library uses it. */
export type OtelApiModule = typeof OtelApi;

let loaded: OtelApiModule | null | undefined;

/**
 * `@opentelemetry/api`, or null when it is not installed: it is an optional peer, so it is
 * required on first use, once, and a failure to find it only turns telemetry off. The API keeps
 * its providers in a process-wide registry, so the copy found here sees the SDK the application
 * registered, even when the two were installed as separate copies.
 */
export function otelApi(): OtelApiModule | null {
  if (loaded === undefined) {
    try {
      // A static import would make the package a hard dependency.
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      loaded = require('@opentelemetry/api') as OtelApiModule;
    } catch {
      loaded = null;
    }
  }
  return loaded;
}
