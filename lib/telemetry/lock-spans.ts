import type { Attributes, Span, Tracer, TracerProvider } from '@opentelemetry/api';
import type { TelemetryKeys } from '../options/telemetry-options';
import { keyAttributes } from './key-attributes';
import { errorType, SCOPE_NAME } from './lock-metrics';
import type { LockMode } from './lock-mode';
import { registeredGlobal, type OtelApiModule } from './otel-api';
import type { AcquireSpan, HoldSpan } from './span-handles';

/**
 * The spans of one LockService. A span is started only when a tracer provider is registered:
 * without one, nothing is created per call, not even the API's non-recording span.
 */
export class LockSpans {
  private readonly noopProvider: TracerProvider;
  private provider?: TracerProvider;
  private tracer?: Tracer;

  constructor(
    private readonly api: OtelApiModule,
    private readonly version: string,
    private readonly mode: LockMode,
    private readonly keys: TelemetryKeys,
  ) {
    // What the API delegates to while no SDK is registered.
    this.noopProvider = new api.ProxyTracerProvider().getDelegate();
  }

  startAcquire(key: string): AcquireSpan | undefined {
    const span = this.start('lock.acquire', key);
    if (!span) return undefined;
    return {
      run: (fn) => this.within(span, fn),
      acquired: (fence) => {
        span.setAttributes({ 'lock.outcome': 'acquired', 'lock.fence': fence });
        span.end();
      },
      busy: (retryAfterMs) => {
        span.setAttributes({ 'lock.outcome': 'busy', 'lock.retry_after_ms': retryAfterMs });
        span.end();
      },
      failed: (error) => this.fail(span, error, { 'lock.outcome': 'error' }),
    };
  }

  startHold(key: string, fence: number, reentrant: boolean): HoldSpan | undefined {
    const span = this.start('lock.hold', key, { 'lock.fence': fence, 'lock.reentrant': reentrant });
    if (!span) return undefined;
    return {
      run: (fn) => this.within(span, fn),
      end: (thrown, lost) => {
        const attributes: Attributes = lost
          ? { 'lock.outcome': 'lost', 'lock.lost.reason': lost }
          : { 'lock.outcome': 'released' };
        if (thrown) this.fail(span, thrown.error, attributes);
        else {
          span.setAttributes(attributes);
          span.end();
        }
      },
    };
  }

  /** A span under the active one, or undefined when no tracer provider is registered. */
  private start(name: string, key: string, more?: Attributes): Span | undefined {
    const tracer = this.currentTracer();
    if (!tracer) return undefined;
    const attributes = { 'lock.mode': this.mode, ...keyAttributes(this.keys, key), ...more };
    return tracer.startSpan(name, { attributes }, this.api.context.active());
  }

  private within<T>(span: Span, fn: () => T): T {
    const { context, trace } = this.api;
    return context.with(trace.setSpan(context.active(), span), fn);
  }

  /**
   * Ends `span` as failed, naming the error's class only: lock errors' messages name the key, which
   * must not reach a span the `keys` option keeps it out of.
   */
  private fail(span: Span, error: unknown, attributes: Attributes): void {
    const type = errorType(error);
    span.setAttributes({ ...attributes, 'error.type': type });
    span.setStatus({ code: this.api.SpanStatusCode.ERROR, message: type });
    span.end();
  }

  private currentTracer(): Tracer | undefined {
    if (!registeredGlobal('trace')) return undefined;
    const global = this.api.trace.getTracerProvider();
    const provider = global instanceof this.api.ProxyTracerProvider ? global.getDelegate() : global;
    if (provider === this.noopProvider) return undefined;
    if (provider !== this.provider) {
      this.provider = provider;
      this.tracer = provider.getTracer(SCOPE_NAME, this.version);
    }
    return this.tracer;
  }
}
