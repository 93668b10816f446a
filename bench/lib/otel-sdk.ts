import { context, metrics, trace } from '@opentelemetry/api';
import {
  AggregationTemporality,
  MeterProvider,
  PeriodicExportingMetricReader,
  type PushMetricExporter,
} from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  type SpanExporter,
} from '@opentelemetry/sdk-trace-base';
import { AsyncContextManager } from '../../test/support/async-context-manager';

/** Exporters that drop what they get: the SDK's own work is measured, not a network. */
const dropSpans: SpanExporter = {
  export: (_spans, done) => done({ code: 0 }),
  shutdown: async () => undefined,
};
const dropMetrics: PushMetricExporter = {
  export: (_metrics, done) => done({ code: 0 }),
  forceFlush: async () => undefined,
  shutdown: async () => undefined,
  selectAggregationTemporality: () => AggregationTemporality.CUMULATIVE,
};

/** An OpenTelemetry SDK that can be registered globally and unregistered again, in turns. */
export function otelSdk() {
  const meterProvider = new MeterProvider({
    readers: [
      new PeriodicExportingMetricReader({ exporter: dropMetrics, exportIntervalMillis: 3_600_000 }),
    ],
  });
  const tracerProvider = new BasicTracerProvider({
    spanProcessors: [new BatchSpanProcessor(dropSpans)],
  });
  const contextManager = new AsyncContextManager();
  return {
    register(): void {
      context.setGlobalContextManager(contextManager);
      metrics.setGlobalMeterProvider(meterProvider);
      trace.setGlobalTracerProvider(tracerProvider);
    },
    unregister(): void {
      metrics.disable();
      trace.disable();
      context.disable();
    },
    async shutdown(): Promise<void> {
      await meterProvider.shutdown();
      await tracerProvider.shutdown();
    },
  };
}
