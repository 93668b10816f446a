import { Module } from '@nestjs/common';
import { RedisLockModule } from 'nestjs-redis-lock';
import { PREFIX, REDIS_URL } from './config.js';
import { ReportService } from './report.service.js';

@Module({
  imports: [RedisLockModule.forRoot({ redis: REDIS_URL, prefix: PREFIX })],
  providers: [ReportService],
})
export class AppModule {}
