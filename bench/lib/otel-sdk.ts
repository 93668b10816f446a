import {
  context,
  metrics,
  trace,
  ROOT_CONTEXT,
  type Context,
  type ContextManager,
} from '@opentelemetry/api';
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
import { AsyncLocalStorage } from 'node:async_hooks';

/** The active context carried across awaits, as the Node SDK's context manager does. */
class AsyncContextManager implements ContextManager {
  private readonly storage = new AsyncLocalStorage<Context>();
  active(): Context {
    return this.storage.getStore() ?? ROOT_CONTEXT;
  }
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(
    ctx: Context,
    fn: F,
    thisArg?: ThisParameterType<F>,
    ...args: A
  ): ReturnType<F> {
    return this.storage.run(ctx, () => fn.apply(thisArg, args));
  }
  bind<T>(_ctx: Context, target: T): T {
    return target;
  }
  enable(): this {
    return this;
  }
  disable(): this {
    this.storage.disable();
    return this;
  }
}

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
