import 'reflect-metadata';
import {
  Body,
  Catch,
  ConflictException,
  Controller,
  type ExceptionFilter,
  Get,
  Headers,
  HttpException,
  Param,
  Post,
  Redirect,
  Render,
  Res,
  Sse,
  UseFilters,
  UseInterceptors,
  type CallHandler,
  type ExecutionContext,
  type NestInterceptor,
} from '@nestjs/common';
import type { HttpAdapterHost } from '@nestjs/core';
import { EventPattern } from '@nestjs/microservices';
import { Observable } from 'rxjs';
import { RedisLockError } from '../errors/errors';
import type { RedisLockModuleOptions } from '../options/redis-lock-options';
import { resolveOptions } from '../options/resolve-options';
import { LockExceptionFilter } from '../transports/lock-exception.filter';
import { interceptedBecause, type InterceptedBecause } from './direct-routes';
import { Locked } from './locked.decorator';
import { LockedInterceptor } from './locked.interceptor';
import { getLockedSpec } from './locked-spec';

class Tracing implements NestInterceptor {
  intercept(_context: ExecutionContext, next: CallHandler) {
    return next.handle();
  }
}

@Catch()
class CatchAll implements ExceptionFilter {
  catch(): void {}
}

@Catch(HttpException)
class HttpErrors implements ExceptionFilter {
  catch(): void {}
}

@Catch(RedisLockError)
class LockErrors implements ExceptionFilter {
  catch(): void {}
}

@Catch(ConflictException)
class Conflicts implements ExceptionFilter {
  catch(): void {}
}

class QueryFailed extends Error {}

@Catch(QueryFailed)
class QueryErrors implements ExceptionFilter {
  catch(): void {}
}

/** Inherits `LockExceptionFilter`'s `@Catch()`: a user's own answer to lock errors. */
class MyLockAnswers extends LockExceptionFilter {}

@Controller('orders')
class Orders {
  @Get(':id')
  @Locked('order:<id>')
  async plain(@Param('id') id: string) {
    return { id };
  }

  @Post(':id')
  @Locked(['order:<id>', 'user:<dto.userId>'], { wait: 2_000 })
  async twoKeysWaiting(@Param('id') id: string, @Body() dto: { userId: string }) {
    return { id, dto };
  }

  @Get('tenant/:id')
  @Locked('tenant:<headers.x-tenant>')
  async byRawHeader(@Param('id') id: string) {
    return { id };
  }

  @Get('tenant-param/:id')
  @Locked('tenant:<tenant>')
  async byHeaderParameter(@Headers('x-tenant') tenant: string) {
    return { tenant };
  }

  @Get('mine')
  @Locked('user:<user.id>')
  async byGuardSetUser() {
    return {};
  }

  @Get('function/:id')
  @Locked((_context: ExecutionContext, args: readonly unknown[]) => `f:${String(args[0])}`)
  async byFunction(@Param('id') id: string) {
    return { id };
  }

  @Get('two/:id')
  @Locked(['order:<id>', 'tenant:<headers.x-tenant>'])
  async oneKeyFromTheRequest(@Param('id') id: string) {
    return { id };
  }

  @Get('res/:id')
  @Locked('order:<id>')
  async answersItself(@Param('id') id: string, @Res() res: { send(body: unknown): void }) {
    res.send({ id });
  }

  @Get('passthrough/:id')
  @Locked('order:<id>')
  async passthrough(@Param('id') id: string, @Res({ passthrough: true }) res: object) {
    return { id, res: typeof res };
  }

  @Sse('events/:id')
  @Locked('order:<id>')
  async events(@Param('id') id: string) {
    return new Observable<{ data: string }>((subscriber) => subscriber.next({ data: id }));
  }

  @Get('stream/:id')
  @Locked('order:<id>')
  declaredStream(@Param('id') id: string): Observable<string> {
    return new Observable<string>((subscriber) => subscriber.next(id));
  }

  @Get('page/:id')
  @Render('order')
  @Locked('order:<id>')
  async page(@Param('id') id: string) {
    return { id };
  }

  @Get('moved/:id')
  @Redirect('/elsewhere')
  @Locked('order:<id>')
  async moved(@Param('id') id: string) {
    return { id };
  }

  @Get('skip/:id')
  @Locked('order:<id>', { onBusy: 'skip' })
  async skips(@Param('id') id: string) {
    return { id };
  }

  @Get('traced/:id')
  @UseInterceptors(Tracing)
  @Locked('order:<id>')
  async traced(@Param('id') id: string) {
    return { id };
  }

  @Get('both/:id')
  @EventPattern('order.both')
  @Locked('order:<id>')
  async alsoAnEvent(@Param('id') id: string) {
    return { id };
  }

  @Get('caught/:id')
  @UseFilters(LockErrors)
  @Locked('order:<id>')
  async caught(@Param('id') id: string) {
    return { id };
  }

  @Get('own-answer/:id')
  @UseFilters(LockExceptionFilter)
  @Locked('order:<id>')
  async ownAnswer(@Param('id') id: string) {
    return { id };
  }
}

@Controller('traced')
@UseInterceptors(Tracing)
class TracedOrders {
  @Get(':id')
  @Locked('order:<id>')
  async plain(@Param('id') id: string) {
    return { id };
  }
}

@Controller('filtered')
@UseFilters(new HttpErrors())
class FilteredOrders {
  @Get(':id')
  @Locked('order:<id>')
  async plain(@Param('id') id: string) {
    return { id };
  }
}

/** The module's default answer: a `LockExceptionFilter` instance first of the app's filters. */
const defaultAnswer = new LockExceptionFilter({} as HttpAdapterHost);

function why(
  controller: { prototype: object },
  method: string,
  options: RedisLockModuleOptions = {},
  globals: { interceptors?: unknown[]; filters?: unknown[] } = {},
): InterceptedBecause | undefined {
  const handler = (controller.prototype as Record<string, object>)[method]!;
  return interceptedBecause({
    spec: getLockedSpec(handler)!,
    controller,
    method,
    handler,
    options: resolveOptions(options),
    globals: {
      interceptors: globals.interceptors ?? [],
      filters: globals.filters ?? [defaultAnswer],
    },
  });
}

describe('which @Locked routes Nest calls without LockedInterceptor', () => {
  it('a route keyed from its parameters: none needed', () => {
    expect(why(Orders, 'plain')).toBeUndefined();
  });

  it("several keys, and a wait: none needed (a wait is only given up by an interceptor's caller)", () => {
    expect(why(Orders, 'twoKeysWaiting')).toBeUndefined();
    expect(why(Orders, 'plain', { wait: 5_000 })).toBeUndefined();
  });

  it('@Res({ passthrough: true }): none needed, Nest sends what it returns', () => {
    expect(why(Orders, 'passthrough')).toBeUndefined();
  });

  it('a header read through a parameter: none needed', () => {
    expect(why(Orders, 'byHeaderParameter')).toBeUndefined();
  });

  it.each<[string, string]>([
    ['a header no parameter supplies', 'byRawHeader'],
    ['request.user', 'byGuardSetUser'],
    ['a key function', 'byFunction'],
    ['one of several templates reading the request', 'oneKeyFromTheRequest'],
  ])('a key read from the request (%s): the interceptor', (_what, method) => {
    expect(why(Orders, method)).toBe('key read from the request');
  });

  it.each<[string, InterceptedBecause]>([
    ['answersItself', 'answers by itself'],
    ['events', 'streams'],
    ['declaredStream', 'streams'],
    ['page', 'renders or redirects'],
    ['moved', 'renders or redirects'],
    ['skips', 'skips when busy'],
    ['traced', 'other interceptors'],
    ['alsoAnEvent', 'not only an HTTP route'],
    ['caught', 'a filter of yours'],
  ])('%s: the interceptor (%s)', (method, reason) => {
    expect(why(Orders, method)).toBe(reason);
  });

  it("the module's options: onBusy 'skip', an exceptionFactory", () => {
    expect(why(Orders, 'plain', { onBusy: 'skip' })).toBe('skips when busy');
    expect(why(Orders, 'plain', { exceptionFactory: () => new ConflictException() })).toBe(
      'exception factory',
    );
  });

  it('an interceptor on the class or the app, LockedInterceptor itself or a subclass of it included', () => {
    class MyLockedInterceptor extends LockedInterceptor {}
    expect(why(TracedOrders, 'plain')).toBe('other interceptors');
    for (const interceptor of [new Tracing(), LockedInterceptor, MyLockedInterceptor]) {
      expect(why(Orders, 'plain', {}, { interceptors: [interceptor] })).toBe('other interceptors');
    }
  });

  it('ignores LockedInterceptor among the method’s own (the one @Locked adds)', () => {
    const handler = Orders.prototype.plain;
    expect(Reflect.getMetadata('__interceptors__', handler)).toEqual([LockedInterceptor]);
    expect(why(Orders, 'plain')).toBeUndefined();
  });

  it('a filter that would see the failure or its HttpException: every exception, HttpException, a lock error, a subclass of LockExceptionFilter', () => {
    expect(why(FilteredOrders, 'plain')).toBe('a filter of yours');
    for (const filter of [
      new CatchAll(),
      HttpErrors,
      new LockErrors(),
      new MyLockAnswers({} as HttpAdapterHost),
    ]) {
      expect(why(Orders, 'plain', {}, { filters: [defaultAnswer, filter] })).toBe(
        'a filter of yours',
      );
    }
  });

  it('filters that see neither: ConflictException (the interceptor throws HttpException), an error of the app', () => {
    for (const filter of [new Conflicts(), QueryErrors]) {
      expect(why(Orders, 'plain', {}, { filters: [defaultAnswer, filter] })).toBeUndefined();
    }
  });

  it('no LockExceptionFilter to answer (answerLockErrors: false), unless the user registered one', () => {
    expect(why(Orders, 'plain', {}, { filters: [] })).toBe('no LockExceptionFilter');
    expect(why(Orders, 'plain', {}, { filters: [new Conflicts()] })).toBe('no LockExceptionFilter');
    expect(why(Orders, 'ownAnswer', {}, { filters: [] })).toBeUndefined();
    expect(why(Orders, 'plain', {}, { filters: [LockExceptionFilter] })).toBeUndefined();
  });
});
