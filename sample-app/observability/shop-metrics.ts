import { metrics } from '@opentelemetry/api';
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import type { OnApplicationShutdown } from '@nestjs/common';

export const SHOP_METRICS = Symbol('SHOP_METRICS');

/**
 * The shop's OpenTelemetry metrics: a global MeterProvider whose reader is a Prometheus exporter,
 * scraped at the app's own `GET /metrics` (MetricsController). The exporter's own HTTP server is
 * not started (`preventServerStart`): replicas run on ports the OS picks (`PORT=0`) and on one
 * host, where a fixed exporter port would collide, and one port per container keeps the Docker
 * and orchestrator set-up to one port for orders, health and metrics.
 */
export class ShopMetrics implements OnApplicationShutdown {
  readonly exporter = new PrometheusExporter({ preventServerStart: true });
  private readonly provider = new MeterProvider({ readers: [this.exporter] });

  /**
   * Registers the provider globally. Called before Nest bootstraps, so the library's first lock
   * call already finds it (it would also pick up a provider registered later, at its next call).
   */
  static start(): ShopMetrics {
    const shopMetrics = new ShopMetrics();
    metrics.setGlobalMeterProvider(shopMetrics.provider);
    return shopMetrics;
  }

  /** Nest's shutdown hook: stops the reader, after the locks were released and recorded. */
  async onApplicationShutdown(): Promise<void> {
    await this.provider.shutdown();
    metrics.disable();
  }
}
