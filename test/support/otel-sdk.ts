import { context, metrics, trace } from '@opentelemetry/api';
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
  type MetricData,
} from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from '@opentelemetry/sdk-trace-base';
import { AsyncContextManager } from './async-context-manager';

/** The scope the library records under. */
export const SCOPE = 'nestjs-redis-lock';

/** An OpenTelemetry SDK registered globally, exporting to memory; `uninstall()` it after. */
export function installOtelSdk() {
  const metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({
    exporter: metricExporter,
    exportIntervalMillis: 3_600_000,
  });
  const meterProvider = new MeterProvider({ readers: [reader] });
  const spanExporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({
    spanProcessors: [new SimpleSpanProcessor(spanExporter)],
  });
  context.setGlobalContextManager(new AsyncContextManager());
  metrics.setGlobalMeterProvider(meterProvider);
  trace.setGlobalTracerProvider(tracerProvider);
  return {
    /** The library's metrics as of now, by name. */
    async metrics(): Promise<Map<string, MetricData>> {
      await reader.forceFlush();
      const latest = metricExporter.getMetrics().at(-1);
      metricExporter.reset();
      const byName = new Map<string, MetricData>();
      for (const scope of latest?.scopeMetrics ?? []) {
        if (scope.scope.name !== SCOPE) continue;
        for (const metric of scope.metrics) byName.set(metric.descriptor.name, metric);
      }
      return byName;
    },
    /** The spans ended so far, in the order they ended. */
    spans(): ReadableSpan[] {
      return spanExporter.getFinishedSpans();
    },
    async uninstall(): Promise<void> {
      metrics.disable();
      trace.disable();
      context.disable();
      await meterProvider.shutdown();
      await tracerProvider.shutdown();
    },
  };
}

/** `(attributes, value)` of each data point of `metric`, for exact comparisons. */
export function pointsOf(metric: MetricData | undefined): { attributes: object; value: unknown }[] {
  return (metric?.dataPoints ?? []).map(({ attributes, value }) => ({ attributes, value }));
}
