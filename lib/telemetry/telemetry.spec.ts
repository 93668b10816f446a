import * as api from '@opentelemetry/api';
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics';
import { createHash } from 'node:crypto';
import { hashKey, keyAttributes } from './key-attributes';
import { errorType, LockMetrics } from './lock-metrics';

describe('keyAttributes', () => {
  it('names no key by default, a SHA-256 prefix when hashed, the key when plain', () => {
    const digest = createHash('sha256').update('user:7').digest('hex');
    expect(keyAttributes('none', 'user:7')).toEqual({});
    expect(keyAttributes('hashed', 'user:7')).toEqual({ 'lock.key.hash': digest.slice(0, 16) });
    expect(hashKey('user:7')).toHaveLength(16);
    expect(keyAttributes('plain', 'user:7')).toEqual({ 'lock.key': 'user:7' });
  });
});

describe('errorType', () => {
  it("is the error's class name, read from `name` (errors of another realm too)", () => {
    expect(errorType(new TypeError('x'))).toBe('TypeError');
    expect(errorType({ name: 'AbortError', message: 'from another realm' })).toBe('AbortError');
    expect(errorType('a string')).toBe('_OTHER');
    expect(errorType(undefined)).toBe('_OTHER');
  });
});

describe('LockMetrics', () => {
  afterEach(() => api.metrics.disable());

  /** A meter provider registered globally, and the library's counter values from it. */
  function register() {
    const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
    const reader = new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 3_600_000 });
    const provider = new MeterProvider({ readers: [reader] });
    api.metrics.setGlobalMeterProvider(provider);
    return async (name: string): Promise<unknown[]> => {
      await reader.forceFlush();
      const scopes = exporter.getMetrics().at(-1)?.scopeMetrics ?? [];
      const metric = scopes
        .flatMap((scope) => scope.metrics)
        .find((m) => m.descriptor.name === name);
      return (metric?.dataPoints ?? []).map((point) => point.value);
    };
  }

  it('records into a provider registered after it was created, and stops when it goes', async () => {
    const metrics = new LockMetrics(api, '1.2.3', 'fair');
    metrics.acquired(5); // no provider yet: nothing, and nothing to fail
    const acquired = register();
    metrics.acquired(5);
    metrics.acquired(7);
    expect(await acquired('lock.acquired')).toEqual([2]);
    api.metrics.disable();
    metrics.acquired(5);
    expect(await acquired('lock.acquired')).toEqual([2]);
  });

  it('records durations in seconds', async () => {
    const values = register();
    new LockMetrics(api, '1.2.3', 'default').holdEnded(1_500, 'released');
    expect(await values('lock.hold.duration')).toEqual([
      expect.objectContaining({ count: 1, sum: 1.5 }),
    ]);
  });

  it('keeps an "is leader" gauge per role: 1 while this process leads it, 0 after', async () => {
    const values = register();
    const metrics = new LockMetrics(api, '1.2.3', 'default');
    metrics.leader('scheduler', 1);
    metrics.leader('outbox', 1);
    metrics.leader('outbox', -1);
    expect(await values('lock.leader')).toEqual([1, 0]);
  });
});
