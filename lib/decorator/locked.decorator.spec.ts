/* eslint-disable @typescript-eslint/no-explicit-any */
import 'reflect-metadata';
import { Get, HttpCode, SetMetadata } from '@nestjs/common';
import {
  HTTP_CODE_METADATA,
  INTERCEPTORS_METADATA,
  OPTIONAL_PROPERTY_DEPS_METADATA,
  PATH_METADATA,
  PROPERTY_DEPS_METADATA,
} from '@nestjs/common/constants';
import { Observable } from 'rxjs';
import { LockKeyError, RedisLockConfigError, RedisLockError } from '../errors/errors';
import { Locked, type LockedOptions } from './locked.decorator';
import { LockedInterceptor } from './locked.interceptor';
import { getLockedSpec } from './locked-spec';
import { LOCK_SOURCE } from './locked-binding';

describe('@Locked at decoration time', () => {
  describe('validates options when the decorator is created', () => {
    it.each<[string, LockedOptions]>([
      ['ttl: -1', { ttl: -1 }],
      ['ttl: 0', { ttl: 0 }],
      ['ttl: NaN', { ttl: NaN }],
      ['ttl: Infinity', { ttl: Infinity }],
      ['ttl as a string', { ttl: '1000' as any }],
      ['wait: -1', { wait: -1 }],
      ["onBusy: 'wait'", { onBusy: 'wait' as any }],
      ["onLost: 'ignore'", { onLost: 'ignore' as any }],
    ])('rejects %s with RedisLockConfigError', (_what, options) => {
      expect(() => Locked('k', options)).toThrow(RedisLockConfigError);
    });

    it('refuses an unknown option at class definition, naming the method', () => {
      const options = { wiat: 1_000 } as LockedOptions;
      expect(() => {
        class Orders {
          @Locked('order', options)
          async create(): Promise<void> {}
        }
        return Orders;
      }).toThrow(/Orders\.create.*`wiat`.*did you mean `wait`\?/);
    });

    it('names the option and the expected value', () => {
      expect(() => Locked('k', { ttl: -1 })).toThrow(
        'Lock option `ttl` is -1; expected a number > 0 and <= 2147483647 (ms).',
      );
    });

    it.each<LockedOptions>([
      { permits: 2, writerPriority: false },
      { permits: 2, writerPriority: true },
      { permits: 2, mode: 'write' },
      { permits: 2, mode: 'read', writerPriority: true },
    ])('rejects %p at decoration, with a message about semaphores', (options) => {
      expect(() => Locked('k', options)).toThrow(RedisLockConfigError);
      expect(() => Locked('k', options)).toThrow(/semaphore.*no readers or writers/);
    });

    it.each([0.001, 1, 2, 2.5])('rejects ttl %p, naming the shortest lease (3 ms)', (ttl) => {
      expect(() => Locked('k', { ttl })).toThrow(RedisLockConfigError);
      expect(() => Locked('k', { ttl })).toThrow(/whole number of ms of at least 3\b/);
    });

    it('accepts wait: 0 and every valid policy', () => {
      expect(() =>
        Locked('k', { ttl: 3, wait: 0, onBusy: 'skip', onLost: 'log', reentrant: false }),
      ).not.toThrow();
    });
  });

  describe('rejects what is not a method', () => {
    it('a property', () => {
      class Target {
        value = 1;
      }
      expect(() => (Locked('k') as any)(Target.prototype, 'value', undefined)).toThrow(
        new RedisLockConfigError(
          '@Locked() can only decorate methods; Target.value is not a method.',
        ),
      );
    });

    it('a getter', () => {
      expect(() => {
        class Target {
          @(Locked('k') as any)
          get value(): number {
            return 1;
          }
        }
        return Target;
      }).toThrow(RedisLockConfigError);
    });
  });

  it('rejects a bad template at class definition', () => {
    expect(() => {
      class Target {
        @Locked('order:<a><b>')
        async run(a: string, b: string): Promise<string> {
          return a + b;
        }
      }
      return Target;
    }).toThrow(LockKeyError);
  });

  describe('the wrapped method', () => {
    class Orders {
      @Get('orders/:id')
      @HttpCode(202)
      @SetMetadata('roles', ['admin'])
      @Locked('order:<userId>')
      async below(userId: string, voucherId?: string): Promise<string> {
        return `${userId}${voucherId}`;
      }

      @Locked('order:<userId>')
      @Get('other')
      @HttpCode(204)
      @SetMetadata('roles', ['user'])
      async above(userId: string): Promise<string> {
        return userId;
      }
    }

    it('keeps the name and the length', () => {
      expect(Orders.prototype.below.name).toBe('below');
      expect(Orders.prototype.below.length).toBe(2);
      expect(Orders.prototype.above.name).toBe('above');
      expect(Orders.prototype.above.length).toBe(1);
    });

    it('keeps metadata of decorators above and below it', () => {
      expect(Reflect.getMetadata(PATH_METADATA, Orders.prototype.below)).toBe('orders/:id');
      expect(Reflect.getMetadata(HTTP_CODE_METADATA, Orders.prototype.below)).toBe(202);
      expect(Reflect.getMetadata('roles', Orders.prototype.below)).toEqual(['admin']);
      expect(Reflect.getMetadata(PATH_METADATA, Orders.prototype.above)).toBe('other');
      expect(Reflect.getMetadata(HTTP_CODE_METADATA, Orders.prototype.above)).toBe(204);
      expect(Reflect.getMetadata('roles', Orders.prototype.above)).toEqual(['user']);
    });

    it('attaches the LockedInterceptor and its spec', () => {
      expect(Reflect.getMetadata(INTERCEPTORS_METADATA, Orders.prototype.below)).toEqual([
        LockedInterceptor,
      ]);
      const spec = getLockedSpec(Orders.prototype.below)!;
      expect(spec.where).toBe('Orders.below');
      expect(spec.template?.source).toBe('order:<userId>');
      expect([...spec.params!.keys()]).toEqual(['userId', 'voucherId']);
    });

    it('rejects a call on an instance Nest did not create, and never runs the body', async () => {
      let ran = false;
      class Jobs {
        @Locked('job:<id>')
        async run(id: string): Promise<string> {
          ran = true;
          return id;
        }
      }
      const call = new Jobs().run('1');
      await expect(call).rejects.toBeInstanceOf(RedisLockError);
      await expect(call).rejects.toThrow(/Jobs\.run ran, but no LockService is bound/);
      expect(ran).toBe(false);
    });

    it('rejects an Observable method of an unbound instance synchronously', () => {
      // The design:returntype metadata is what marks a method as Observable-returning.
      class Feeds {
        feed(id: string): string {
          return id;
        }
      }
      const descriptor = Object.getOwnPropertyDescriptor(Feeds.prototype, 'feed')!;
      Reflect.defineMetadata('design:returntype', Observable, Feeds.prototype, 'feed');
      Locked('feed:<id>')(Feeds.prototype, 'feed', descriptor);
      Object.defineProperty(Feeds.prototype, 'feed', descriptor);
      expect(() => new Feeds().feed('x')).toThrow(RedisLockError);
    });
  });

  describe('asks Nest to inject the LockService', () => {
    class Base {
      @Locked('a:<id>')
      async a(id: string): Promise<string> {
        return id;
      }

      @Locked('b:<id>')
      async b(id: string): Promise<string> {
        return id;
      }
    }
    class Derived extends Base {
      override async a(id: string): Promise<string> {
        return super.a(id);
      }
    }

    it('once per class, optional, by the global token', () => {
      const properties = Reflect.getMetadata(PROPERTY_DEPS_METADATA, Base) as unknown[];
      expect(properties).toEqual([{ key: expect.any(Symbol), type: LOCK_SOURCE }]);
      expect(LOCK_SOURCE).toBe(Symbol.for('nestjs-redis-lock:lock-source'));
      const optional = Reflect.getMetadata(OPTIONAL_PROPERTY_DEPS_METADATA, Base) as unknown[];
      expect(optional).toEqual([(properties[0] as { key: symbol }).key]);
    });

    it('which a subclass inherits, overriding a method without @Locked or not', () => {
      expect(Reflect.getMetadata(PROPERTY_DEPS_METADATA, Derived)).toEqual(
        Reflect.getMetadata(PROPERTY_DEPS_METADATA, Base),
      );
    });

    it('refuses a static method at class definition', () => {
      expect(() => {
        class Statics {
          @Locked('job')
          static async run(): Promise<void> {}
        }
        return Statics;
      }).toThrow(/@Locked\(\) cannot decorate the static method Statics\.run/);
    });
  });
});
