/**
 * Compile-time specification of `@Locked` (checked by `tsc` in `npm run lint`, never run): it
 * accepts only methods that return a Promise or an Observable, since a locked call waits for its
 * lock. Each `@ts-expect-error` below must stay an error — if the restriction were lost, tsc would
 * report the unused directive and the lint would fail.
 */
import { Controller, Get, Param, Post } from '@nestjs/common';
import { Cron } from '@nestjs/schedule';
import { Observable, of } from 'rxjs';
import { Locked } from 'nestjs-redis-lock';

export class AcceptedMethods {
  @Locked('order:<userId>')
  async createOrder(userId: string, voucherId: string): Promise<string> {
    return userId + voucherId;
  }

  @Locked('stream:<id>')
  stream(id: string): Observable<string> {
    return of(id);
  }

  @Locked('either:<id>')
  either(id: string): Promise<string> | Observable<string> {
    return id ? Promise.resolve(id) : of(id);
  }

  @Locked((...args: unknown[]) => `fn:${String(args[0])}`)
  async withKeyFunction(id: string): Promise<void> {
    void id;
  }

  @Locked((from: string, to: string) => [`account:${from}`, `account:${to}`])
  async withKeysFunction(from: string, to: string): Promise<void> {
    void [from, to];
  }

  @Locked('nothing')
  async noArguments(): Promise<void> {}

  @Locked('static')
  static async onTheClass(): Promise<number> {
    return 1;
  }

  @Cron('0 * * * * *')
  @Locked('settlement', { onBusy: 'skip' })
  async settle(): Promise<void> {}

  @Locked('settlement-above', { onBusy: 'skip' })
  @Cron('0 * * * * *')
  async settleAbove(): Promise<void> {}
}

@Controller('orders')
export class AcceptedRoutes {
  @Post(':id')
  @Locked('order:<id>')
  async create(@Param('id') id: string): Promise<{ id: string }> {
    return { id };
  }

  @Locked('order:<id>')
  @Get(':id')
  find(@Param('id') id: string): Observable<{ id: string }> {
    return of({ id });
  }
}

export class RefusedMethods {
  // @ts-expect-error a synchronous method would start returning a Promise at run time
  @Locked('order:<n>')
  double(n: number): number {
    return n * 2;
  }

  // @ts-expect-error returning nothing synchronously is refused too
  @Locked('job')
  run(): void {}

  // @ts-expect-error a Promise or a plain value: the plain value would become a Promise
  @Locked('maybe:<id>')
  maybe(id: string): Promise<string> | string {
    return id;
  }
}

@Controller('refused')
export class RefusedRoutes {
  // @ts-expect-error a synchronous route handler must become `async`
  @Locked('order:<id>')
  @Get(':id')
  find(@Param('id') id: string): { id: string } {
    return { id };
  }

  @Post(':id')
  // @ts-expect-error below the route decorator as well
  @Locked('order:<id>')
  create(@Param('id') id: string): string {
    return id;
  }
}

export class RefusedKeyFunctions {
  // @ts-expect-error a key function returns a key or an array of keys, not numbers
  @Locked((id: number) => [id])
  async byNumbers(id: number): Promise<void> {
    void id;
  }
}

export class RefusedOptions {
  // @ts-expect-error an unknown option is a compile error as well as a class-definition error
  @Locked('job', { keyPrefix: 'x' })
  async run(): Promise<void> {}
}
