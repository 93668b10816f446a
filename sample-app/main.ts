import 'reflect-metadata';
import type { AddressInfo } from 'node:net';
import { Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { AppModule } from './app.module';
import { ShopMetrics } from './observability/shop-metrics';
import { readSettings } from './settings';

/**
 * One replica of the voucher shop. Run several against one Redis:
 *   PORT=3001 REDIS_URL=redis://127.0.0.1:6379 npm run start:sample
 * Environment: see settings.ts (PORT, REDIS_URL, LOCKS, ORDER_DELAY_MS, STOCK_WAIT_MS,
 * SHOP_PREFIX, REPLICA, SEED_VOUCHERS, SETTLEMENT, METRICS).
 */
async function bootstrap(): Promise<void> {
  const settings = readSettings();
  // The meter provider goes global before Nest creates the LockService, as OpenTelemetry asks.
  const metrics = settings.metrics ? ShopMetrics.start() : undefined;
  const app = await NestFactory.create(AppModule.forRoot(settings, metrics), {
    logger: ['error', 'warn', 'log'],
  });
  // SIGTERM/SIGINT → stop the cron job, release held locks, close Redis connections, exit.
  app.enableShutdownHooks();
  await app.listen(settings.port);
  const { port } = app.getHttpServer().address() as AddressInfo;
  new Logger('Shop').log(
    `Replica ${settings.replica} listening on port ${port} ` +
      `(locks ${settings.locks ? 'on' : 'off'}, order delay ${settings.orderDelayMs} ms, ` +
      `prefix "${settings.prefix}")`,
  );
}

bootstrap().catch((error: unknown) => {
  console.error(error instanceof Error ? (error.stack ?? error.message) : error);
  process.exit(1);
});
