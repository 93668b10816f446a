// The `nestjs-redis-lock/health` entry on NestJS 12 with @nestjs/terminus 12 (compat/run.sh
// installs terminus into the compat app after check.js, which needs it absent): the indicator
// reports up through terminus' HealthCheckService against the Redis at REDIS_URL.
'use strict';
require('reflect-metadata');
const assert = require('node:assert/strict');
const { Module } = require('@nestjs/common');
const { NestFactory } = require('@nestjs/core');
const { HealthCheckService, TerminusModule } = require('@nestjs/terminus');
const { RedisLockModule } = require('nestjs-redis-lock');
const { LockHealthIndicator } = require('nestjs-redis-lock/health');

class AppModule {}
Module({
  imports: [
    TerminusModule,
    RedisLockModule.forRoot({
      redis: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
      prefix: `compat-health:${process.pid}:`,
    }),
  ],
  providers: [LockHealthIndicator],
})(AppModule);

async function main() {
  const app = await NestFactory.createApplicationContext(AppModule, { logger: false });
  try {
    const health = app.get(HealthCheckService);
    const locks = app.get(LockHealthIndicator);
    const result = await health.check([() => locks.isHealthy('locks')]);
    assert.equal(result.status, 'ok');
    assert.equal(result.info.locks.status, 'up');
    const terminus = require('@nestjs/terminus/package.json').version;
    const nest = require('@nestjs/core/package.json').version;
    console.log(`compat health: NestJS ${nest}, @nestjs/terminus ${terminus}: 1 passed, 0 failed`);
  } finally {
    await app.close();
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
