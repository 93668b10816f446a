import { Controller, Get, HttpCode, Post } from '@nestjs/common';
import { Locked } from 'nestjs-redis-lock';
import { SettlementService, type SettlementRun } from './settlement.service';

/** `POST /settlements` runs a settlement pass now; `GET /settlements` lists the recent ones. */
@Controller('settlements')
export class SettlementController {
  constructor(protected readonly settlement: SettlementService) {}

  @Post()
  @HttpCode(200)
  run(): Promise<SettlementRun | undefined> {
    return this.settlement.settle();
  }

  @Get()
  recent(): Promise<unknown[]> {
    return this.settlement.recentRuns();
  }
}

/**
 * The controller-level `@Locked` example: the route takes the `settlement` lock before the handler
 * runs. While the cron job (on any replica) holds it, the route answers 409 with `Retry-After`
 * (shaped by the module's `exceptionFactory`); when free, it holds the lock for the whole pass.
 */
@Controller('settlements')
export class LockedSettlementController extends SettlementController {
  @Post()
  @HttpCode(200)
  @Locked('settlement')
  override run(): Promise<SettlementRun | undefined> {
    return super.run();
  }
}
