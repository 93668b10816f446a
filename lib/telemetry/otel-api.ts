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

/**
 * Whether anything registered the API's global `type` ('metrics', 'trace') — an SDK does at start:
 * one property read of the API's process-wide registry, where `getMeterProvider()` and
 * `getTracerProvider()` also check the registry's version. Without a registration both answer no-op
 * providers, so a lock call asks this first and stops there: telemetry costs nothing per call
 * while no SDK runs.
 */
export function registeredGlobal(type: 'metrics' | 'trace'): boolean {
  const registry = (globalThis as Record<symbol, Record<string, unknown> | undefined>)[REGISTRY];
  return registry?.[type] !== undefined;
}

/**
 * Where `@opentelemetry/api` 1.x — the peer range — keeps its globals (`global-utils.ts` there:
 * one registry per major version, shared by every copy of the API in the process).
 */
const REGISTRY = Symbol.for('opentelemetry.js.api.1');
