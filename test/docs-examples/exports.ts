// The code of docs/semaphores.md's examples, as an app would have it.
import { Controller, Injectable, Param, Post } from '@nestjs/common';
import { currentLock, Locked, LockService } from 'nestjs-redis-lock';

export abstract class ExportJob {
  abstract run(tenantId: string, fence: number): Promise<string>;
}

@Injectable()
export class ExportService {
  constructor(
    private readonly locks: LockService,
    private readonly job: ExportJob,
  ) {}

  /** At most 3 exports per tenant at once, across every replica; the 4th waits up to 30 s. */
  export(tenantId: string): Promise<string> {
    return this.locks.withLock(
      `export:${tenantId}`,
      (permit) => this.job.run(tenantId, permit.fence),
      { permits: 3, wait: 30_000 },
    );
  }

  /** One permit held by hand: always release it. */
  async exportByHand(tenantId: string): Promise<string> {
    const permit = await this.locks.acquire(`export:${tenantId}`, { permits: 3, wait: 30_000 });
    try {
      return await this.job.run(tenantId, permit.fence);
    } finally {
      await permit.release();
    }
  }
}

@Controller('exports')
export class ExportController {
  constructor(private readonly job: ExportJob) {}

  /** 3 requests per tenant run at once; a 4th gets 409 with Retry-After. */
  @Post(':tenantId')
  @Locked('export:<tenantId>', { permits: 3 })
  async start(@Param('tenantId') tenantId: string): Promise<string> {
    return this.job.run(tenantId, currentLock()!.fence);
  }
}
