/**
 * Every Prometheus name the docs give — metrics, labels, the series in the sample alerts — is one
 * the Prometheus exporter really produces from the library's metrics. A scenario on a Redis of its
 * own makes every instrument record (acquired, busy, waiting, held, lost, a failed renewal, an
 * acquire that errored); the exporter's text is then the reference the docs are read against.
 * And every OpenTelemetry package a docs snippet imports is on an install line of that page.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Logger } from '@nestjs/common';
import { metrics } from '@opentelemetry/api';
import { PrometheusExporter, PrometheusSerializer } from '@opentelemetry/exporter-prometheus';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import { LockNotAcquiredError, type LockService } from 'nestjs-redis-lock';
import { CONNECT_BUDGET, lockServices } from '../support/lock-services';
import { startRedis, type RedisServer } from '../support/redis-server';
import { uniquePrefix } from '../support/unique-prefix';

const ROOT = join(__dirname, '../..');
const PAGES = ['README.md', ...readdirSync(join(ROOT, 'docs')).map((f) => `docs/${f}`)].filter(
  (f) => f.endsWith('.md'),
);
const text = (page: string): string => readFileSync(join(ROOT, page), 'utf8');

/** Prometheus names in the docs: `lock_…` metrics and labels (`lock_x_*` a family), `error_type`. */
function namesInDocs(): Map<string, string[]> {
  const found = new Map<string, string[]>();
  for (const page of PAGES) {
    for (const [name] of text(page).matchAll(/\b(?:lock|error)_[a-z_]*[a-z](?:_\*)?/g)) {
      found.set(name, [...(found.get(name) ?? []), page]);
    }
  }
  return found;
}

/** The series and label names of a Prometheus text exposition. */
function parseExposition(exposition: string) {
  const series = new Set<string>();
  const labels = new Set<string>();
  for (const line of exposition.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][\w:]*)(?:\{([^}]*)\})?\s/.exec(line);
    if (!match) continue;
    series.add(match[1]!);
    for (const [, label] of (match[2] ?? '').matchAll(/([a-zA-Z_]\w*)="/g)) labels.add(label!);
  }
  return { series, labels };
}

/** Resolves the reason of the next `'lost'` event of `locks`. */
function nextLoss(locks: LockService): Promise<string> {
  return new Promise((resolve) => locks.on('lost', (error) => resolve(error.reason)));
}

describe('the Prometheus names in the docs', () => {
  const exporter = new PrometheusExporter({ preventServerStart: true });
  const provider = new MeterProvider({ readers: [exporter] });
  let server: RedisServer;
  let exposition = '';

  beforeAll(async () => {
    // The loss below is on purpose; its warning would only repeat what the scenario says.
    jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
    metrics.setGlobalMeterProvider(provider);
    server = await startRedis();
    const own = lockServices({
      redis: server.url,
      prefix: uniquePrefix('metric-names'),
      ttl: 900,
      commandTimeout: 150,
    });
    try {
      const locks = own.create();
      // acquired, held, hold duration (released)
      const first = await locks.acquire('names:1', CONNECT_BUDGET);
      // waiting, then busy
      await expect(locks.acquire('names:1', { wait: 200 })).rejects.toThrow(LockNotAcquiredError);
      await first.release();
      // a failed renewal, then lost (deadline), while Redis is paused; an acquire that errors
      const held = await locks.acquire('names:2');
      const lost = nextLoss(locks);
      server.pause();
      try {
        await expect(locks.acquire('names:3')).rejects.toThrow();
        expect(await lost).toBe('deadline');
      } finally {
        server.resume();
      }
      await held.release();
    } finally {
      await own.closeAll();
    }
    const collected = await exporter.collect();
    exposition = new PrometheusSerializer().serialize(collected.resourceMetrics);
  });

  afterAll(async () => {
    jest.restoreAllMocks();
    metrics.disable();
    await provider.shutdown();
    await server?.stop();
  });

  it('the scenario made every instrument of the library record', () => {
    const { series } = parseExposition(exposition);
    for (const family of [
      'lock_acquire_duration_bucket',
      'lock_hold_duration_bucket',
      'lock_acquired_total',
      'lock_busy_total',
      'lock_lost_total',
      'lock_renewal_failures_total',
      'lock_held',
      'lock_waiting',
    ]) {
      expect([...series]).toContain(family);
    }
  });

  it('names only metrics, families and labels the exporter produces', () => {
    const { series, labels } = parseExposition(exposition);
    const unknown: string[] = [];
    for (const [name, pages] of namesInDocs()) {
      const known = name.endsWith('_*')
        ? [...series].some((s) => s.startsWith(name.slice(0, -1)))
        : series.has(name) || labels.has(name);
      if (!known) unknown.push(`${name} (${[...new Set(pages)].join(', ')})`);
    }
    expect(unknown).toEqual([]);
    // The docs name some, or this test would check nothing.
    expect(namesInDocs().size).toBeGreaterThan(5);
  });

  it('gives every OpenTelemetry package a snippet imports on an install line of its page', () => {
    const missing: string[] = [];
    for (const page of PAGES) {
      const source = text(page);
      const installed = [...source.replace(/\\\n\s*/g, ' ').matchAll(/^npm install (.*)$/gm)]
        .flatMap((m) => m[1]!.replace(/#.*/, '').split(/\s+/))
        .map((pkg) => pkg.replace(/(.)@[^/]*$/, '$1'));
      for (const [, pkg] of source.matchAll(/from '(@opentelemetry\/[^']+)'/g)) {
        if (pkg !== '@opentelemetry/api' && !installed.includes(pkg!)) {
          missing.push(`${page}: ${pkg}`);
        }
      }
    }
    expect(missing).toEqual([]);
  });
});
