import 'reflect-metadata';
import {
  Body,
  Controller,
  Headers,
  Param,
  Post,
  Query,
  type ExecutionContext,
  type Type,
} from '@nestjs/common';
import { MessagePattern, Payload } from '@nestjs/microservices';
import { LockKeyError, RedisLockConfigError } from '../errors/errors';
import { Locked } from './locked.decorator';
import {
  assertProviderPlaceholders,
  createLockedSpec,
  getLockedSpec,
  keyFromArguments,
  keyFromRoute,
  type LockKeyFactory,
} from './locked-spec';
import { assertRoutePlaceholders } from './route-key-plan';

/** A stand-in ExecutionContext of one transport, for `Class.method`. */
function context(
  type: 'http' | 'rpc' | 'ws',
  payload: unknown,
  owner: Type,
  method: string,
): ExecutionContext {
  return {
    getType: () => type,
    getClass: () => owner,
    getHandler: () => (owner.prototype as Record<string, unknown>)[method],
    switchToHttp: () => ({ getRequest: () => payload }),
    switchToRpc: () => ({ getData: () => payload }),
    switchToWs: () => ({ getData: () => payload }),
  } as unknown as ExecutionContext;
}

const spec = (owner: Type, method: string) =>
  getLockedSpec((owner.prototype as Record<string, unknown>)[method])!;

function providerSpec(key: string | LockKeyFactory, method: (...args: never[]) => unknown) {
  return createLockedSpec(
    key,
    {},
    method,
    { owner: Object, method: 'method', where: 'Svc.method' },
    false,
  );
}

const request = {
  params: { id: 'P', userId: 'raw-param' },
  query: { id: 'Q', userId: 'from-query' },
  body: { id: 'B', userId: 'from-body', dto: { user: { id: 'U1' } } },
  headers: { 'x-tenant': 'acme' },
  user: { id: 'me', org: 'org-1' },
};

@Controller('shops/:shopId')
class Routes {
  @Post('orders/:userId')
  @Locked('k:<userId>:<id>:<tenant>')
  async bare(@Param('userId') id: number, @Headers('X-Tenant') tenant: string) {
    return [id, tenant];
  }

  @Post('explicit/:id')
  @Locked('<params.id>:<query.id>:<body.id>:<headers.X-Tenant>:<user.id>:<params.shopId>')
  async explicit(@Query() query: { id: string }) {
    return query;
  }

  @Post('proto')
  @Locked('k:<body.toString>')
  async proto() {
    return undefined;
  }

  @Post('fn/:id')
  @Locked(
    (ctx: ExecutionContext, args: readonly unknown[]) => `fn:${ctx.getType()}:${String(args[0])}`,
  )
  async fn(@Param('id') id: number) {
    return id;
  }

  @Post('bad-fn')
  @Locked((() => undefined) as unknown as LockKeyFactory)
  async badFn() {
    return undefined;
  }

  @MessagePattern('order')
  @Locked('o:<orderId>:<data.user.id>:<user.id>')
  async message(@Payload() dto: { orderId: string }) {
    return dto;
  }
}

describe('keys of handler calls, from the arguments the handler receives (keyFromRoute)', () => {
  it('reads a bare name from the one parameter it names, by TypeScript or decorator name', () => {
    const key = keyFromRoute(
      spec(Routes, 'bare'),
      [42, 'acme'],
      context('http', request, Routes, 'bare'),
    );
    expect(key).toBe('k:42:42:acme');
  });

  it('reads an explicit source from a parameter bound to it (piped), else from the request', () => {
    const piped = { id: 'Q-piped' };
    const key = keyFromRoute(
      spec(Routes, 'explicit'),
      [piped],
      context(
        'http',
        { ...request, params: { ...request.params, shopId: 'S' } },
        Routes,
        'explicit',
      ),
    );
    expect(key).toBe('P:Q-piped:B:acme:me:S');
  });

  it('never reads request prototypes', () => {
    expect(() =>
      keyFromRoute(spec(Routes, 'proto'), [], context('http', request, Routes, 'proto')),
    ).toThrow(LockKeyError);
  });

  it('reads a message from its payload parameter: its fields, data., and nested names', () => {
    const dto = { orderId: 'o-1', user: { id: 'u-2' } };
    const key = keyFromRoute(
      spec(Routes, 'message'),
      [dto],
      context('rpc', { orderId: 'raw' }, Routes, 'message'),
    );
    expect(key).toBe('o:o-1:u-2:u-2');
  });

  it('calls a key function with the context and the piped arguments, and checks its result', () => {
    expect(keyFromRoute(spec(Routes, 'fn'), [7], context('http', request, Routes, 'fn'))).toBe(
      'fn:http:7',
    );
    expect(() =>
      keyFromRoute(spec(Routes, 'badFn'), [], context('http', request, Routes, 'badFn')),
    ).toThrow(/key function of @Locked\(\) on Routes.badFn returned undefined/);
  });

  describe('rejects at bootstrap (RedisLockConfigError)', () => {
    const check = (owner: Type, method: string) => () =>
      assertRoutePlaceholders(
        spec(owner, method),
        owner,
        (owner.prototype as Record<string, object>)[method]!,
      );

    it('a name that matches two parameters', () => {
      @Controller()
      class C {
        @Post(':userId')
        @Locked('k:<userId>')
        async m(@Param('userId') id: string, @Body('id') userId: string) {
          return [id, userId];
        }
      }
      expect(check(C, 'm')).toThrow(RedisLockConfigError);
      expect(check(C, 'm')).toThrow(/<userId> matches 2 parameters/);
    });

    it('a bare name that names no parameter, with what it could mean', () => {
      @Controller()
      class C {
        @Post(':userId')
        @Locked('k:<userId>')
        async m(@Body() dto: object) {
          return dto;
        }
      }
      expect(check(C, 'm')).toThrow(
        /C\.m: <userId> matches no parameter .*<params\.userId>, <body\.userId>, <query\.userId>, <user\.userId>, <dto\.userId>/,
      );
    });

    it('says when a wrapping decorator below hid the parameter names', () => {
      const hide: MethodDecorator = (_target, _key, descriptor) => {
        const inner = descriptor.value as unknown as (...args: unknown[]) => unknown;
        (descriptor as PropertyDescriptor).value = function (...args: unknown[]) {
          return inner.apply(this, args);
        };
      };
      @Controller()
      class C {
        @Post(':id')
        @Locked('k:<orderId>')
        @hide
        async m(@Param('id') orderId: string) {
          return orderId;
        }
      }
      expect(check(C, 'm')).toThrow(/argument 0 \(@Param\('id'\)\).*could not be read/);
    });

    it('a route param the path does not have, unless a parameter binds it', () => {
      @Controller('c/:shopId')
      class C {
        @Post(':userId')
        @Locked('k:<params.userid>')
        async typo(@Param('userId') userId: string) {
          return userId;
        }

        @Post('x')
        @Locked('k:<params.tenant>')
        async prefixed(@Param('tenant') tenant: string) {
          return tenant;
        }
      }
      expect(check(C, 'typo')).toThrow(
        /<params\.userid> names no param of the route \(route params: shopId, userId\)/,
      );
      expect(check(C, 'prefixed')).not.toThrow();
    });

    it('a source name that a parameter bound to something else also has', () => {
      @Controller()
      class C {
        @Post()
        @Locked('k:<user.id>')
        async m(@Body('user') user: { id: string }) {
          return user;
        }
      }
      expect(check(C, 'm')).toThrow(
        /<user\.id> names a part of the request, and also the parameter user \(@Body\('user'\)\)/,
      );
    });
  });
});

describe('keys of provider calls (keyFromArguments)', () => {
  it('resolves names, paths, indexes and rest parameters', () => {
    function method(userId: string, dto: { voucher: { id: string } }, ...tags: string[]) {
      return [userId, dto, tags];
    }
    expect(
      keyFromArguments(providerSpec('<userId>:<dto.voucher.id>', method), [
        'u',
        { voucher: { id: 'v' } },
      ]),
    ).toBe('u:v');
    expect(
      keyFromArguments(providerSpec('<1.voucher.id>', method), ['u', { voucher: { id: 'v' } }]),
    ).toBe('v');
    expect(keyFromArguments(providerSpec('<tags.1>', method), ['u', {}, 'a', 'b'])).toBe('b');
  });

  it('treats 42 and "42" as the same key', () => {
    const spec = providerSpec('order:<id>', (id: number | string) => id);
    expect(keyFromArguments(spec, [42])).toBe(keyFromArguments(spec, ['42']));
  });

  it('rejects an unknown placeholder, listing the parameters', () => {
    const spec = providerSpec('order:<userID>', (userId: string, voucherId: string) => [
      userId,
      voucherId,
    ]);
    expect(() => assertProviderPlaceholders(spec)).toThrow(
      /<userID> names no parameter \(parameters: userId, voucherId\); did you mean <userId>\?/,
    );
    // A typo in the template is the developer's to fix, never a client's 400.
    expect(() => keyFromArguments(spec, ['u', 'v'])).toThrow(RedisLockConfigError);
  });

  it('rejects a placeholder on a method with unreadable parameter names', () => {
    const bound = function (userId: string) {
      return userId;
    }.bind(null);
    expect(() => assertProviderPlaceholders(providerSpec('order:<userId>', bound))).toThrow(
      /Cannot read the parameter names of Svc.method/,
    );
    // Argument indexes need no names.
    expect(keyFromArguments(providerSpec('order:<0>', bound), ['u'])).toBe('order:u');
  });

  it('never reads argument prototypes through a parameter name', () => {
    const spec = providerSpec('<dto.constructor.name>', (dto: object) => dto);
    expect(() => keyFromArguments(spec, [{}])).toThrow(LockKeyError);
  });
});
