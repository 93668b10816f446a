/**
 * `@Locked` keeps every other decorator's metadata in either order (routing, `@HttpCode`,
 * `SetMetadata` read by a guard, `@UseInterceptors`, Swagger-style method and parameter metadata,
 * pipes), and the method's `name`, `length` and `this`.
 */
import {
  Controller,
  ForbiddenException,
  Get,
  HttpCode,
  Injectable,
  Param,
  ParseIntPipe,
  Post,
  SetMetadata,
  UseGuards,
  UseInterceptors,
  type CallHandler,
  type CanActivate,
  type ExecutionContext,
  type INestApplication,
  type NestInterceptor,
} from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { ROUTE_ARGS_METADATA } from '@nestjs/common/constants';
import type Redis from 'ioredis';
import type { Response } from 'express';
import type { Observable } from 'rxjs';
import request from 'supertest';
import { currentLock, Locked } from 'nestjs-redis-lock';
import { deleteKeys, redisClient } from '../support/shared-redis';
import { uniquePrefix } from '../support/unique-prefix';
import { createDecoratorApp } from './decorator-app';

const prefix = uniquePrefix('decorator-metadata');

const ROLES = 'test:roles';
const Roles = (...roles: string[]) => SetMetadata(ROLES, roles);

/** Stores method metadata the way @nestjs/swagger's @ApiOperation does (on descriptor.value). */
const API_OPERATION = 'swagger/apiOperation';
const ApiOperation =
  (summary: string): MethodDecorator =>
  (_target, _key, descriptor) => {
    Reflect.defineMetadata(API_OPERATION, { summary }, descriptor.value as object);
    return descriptor;
  };

/** Denies the request unless the handler carries `@Roles('admin')`: lost metadata shows as 403. */
@Injectable()
class RolesGuard implements CanActivate {
  constructor(private readonly reflector: Reflector) {}
  canActivate(context: ExecutionContext): boolean {
    const roles = this.reflector.get<string[] | undefined>(ROLES, context.getHandler());
    if (!roles?.includes('admin')) throw new ForbiddenException('roles metadata is missing');
    return true;
  }
}

@Injectable()
class TagInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    context.switchToHttp().getResponse<Response>().setHeader('x-tagged', 'yes');
    return next.handle();
  }
}

@Controller('meta')
@UseGuards(RolesGuard)
class MetaController {
  readonly label = 'meta-controller';

  @Locked('above:<id>')
  @Get('above/:id')
  @HttpCode(202)
  @Roles('admin')
  @ApiOperation('locked on top')
  @UseInterceptors(TagInterceptor)
  async above(@Param('id') id: string): Promise<{ id: string; key: string; self: string }> {
    return { id, key: currentLock()!.key, self: this.label };
  }

  @Get('below/:id')
  @HttpCode(202)
  @Roles('admin')
  @ApiOperation('locked at the bottom')
  @UseInterceptors(TagInterceptor)
  @Locked('below:<id>')
  async below(@Param('id') id: string): Promise<{ id: string; key: string; self: string }> {
    return { id, key: currentLock()!.key, self: this.label };
  }

  @Post('middle/:id')
  @Roles('admin')
  @Locked('middle:<id>')
  @HttpCode(200)
  async middle(@Param('id', ParseIntPipe) id: number): Promise<{ id: number; key: string }> {
    return { id, key: currentLock()!.key };
  }
}

describe('@Locked keeps other decorators working, in either order', () => {
  let app: INestApplication;
  let redis: Redis;

  beforeAll(async () => {
    redis = redisClient();
    app = await createDecoratorApp({ prefix, controllers: [MetaController] });
  });

  afterAll(async () => {
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it.each([
    ['above', 'above:7'],
    ['below', 'below:7'],
  ])(
    '@Locked %s @Get/@HttpCode/SetMetadata/@UseInterceptors: routed, status, guard, interceptor, lock',
    async (route, key) => {
      const response = await request(app.getHttpServer()).get(`/meta/${route}/7`);
      expect(response.status).toBe(202);
      expect(response.headers['x-tagged']).toBe('yes');
      expect(response.body).toEqual({ id: '7', key, self: 'meta-controller' });
    },
  );

  it('@Locked between @Post/@Roles and @HttpCode: routed, status 200, pipes still run', async () => {
    const response = await request(app.getHttpServer()).post('/meta/middle/42');
    expect(response.status).toBe(200);
    // ParseIntPipe ran (a number); the key, taken before pipes, is the same for 42 and '42'.
    expect(response.body).toEqual({ id: 42, key: 'middle:42' });
  });

  it('keeps Swagger-style method metadata and parameter metadata', () => {
    expect(Reflect.getMetadata(API_OPERATION, MetaController.prototype.above)).toEqual({
      summary: 'locked on top',
    });
    expect(Reflect.getMetadata(API_OPERATION, MetaController.prototype.below)).toEqual({
      summary: 'locked at the bottom',
    });
    const args = Reflect.getMetadata(ROUTE_ARGS_METADATA, MetaController, 'above');
    expect(Object.keys(args)).toHaveLength(1);
    expect(Reflect.getMetadata('design:paramtypes', MetaController.prototype, 'middle')).toEqual([
      Number,
    ]);
  });

  it('keeps the method name and length', () => {
    for (const name of ['above', 'below', 'middle'] as const) {
      expect(MetaController.prototype[name].name).toBe(name);
      expect(MetaController.prototype[name].length).toBe(1);
    }
  });
});
