import type { IncomingMessage, ServerResponse } from 'node:http';
import { Controller, Get, Inject, Req, Res } from '@nestjs/common';
import { SHOP_METRICS, type ShopMetrics } from './shop-metrics';

/** `GET /metrics`: the Prometheus text format, the lock metrics of this replica included. */
@Controller('metrics')
export class MetricsController {
  constructor(@Inject(SHOP_METRICS) private readonly metrics: ShopMetrics) {}

  @Get()
  scrape(@Req() request: IncomingMessage, @Res() response: ServerResponse): void {
    // The exporter collects, serializes and writes the response itself (status, content type).
    this.metrics.exporter.getMetricsRequestHandler(request, response);
  }
}
