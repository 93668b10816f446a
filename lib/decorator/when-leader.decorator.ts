import { RedisLockConfigError, RedisLockError } from '../errors/errors';
import { leaderMessages } from '../errors/messages';
import { assertRole } from '../options/resolve-lead-options';
import type { LeaderHandle } from '../service/leader/leader-handle';
import { injectedLockService, injectLockSource } from './locked-binding';

/** The metadata `@WhenLeader` stores on the method it wraps: the role it follows. */
export const WHEN_LEADER_METADATA = Symbol.for('nestjs-redis-lock:when-leader');

/** What `@WhenLeader` asks of the LockService Nest injected: its campaign for the role. */
interface LeaderSource {
  leadership(role: string): LeaderHandle | undefined;
}

/**
 * Runs the method only while this replica leads `role`, and skips it otherwise (it resolves
 * `undefined`): with `@Cron` or `@Interval`, every replica's timer fires, and the leader alone
 * does the work. The decorated method always returns a Promise. The module campaigns for the role
 * at bootstrap (with `leaders` options for it if given, else the defaults); the work a call
 * started counts as the leader's running work, which shutdown lets finish before resigning.
 *
 * @example
 * ```ts
 * @Cron('0 * * * * *')
 * @WhenLeader('scheduler')
 * async settle() { … }
 * ```
 */
export function WhenLeader(role: string): MethodDecorator {
  assertRole(role);
  return (target, propertyKey, descriptor) => {
    const where = `${target.constructor.name}.${String(propertyKey)}`;
    const original: unknown = descriptor.value;
    if (typeof original !== 'function' || typeof target === 'function') {
      throw new RedisLockConfigError(leaderMessages.notAMethod(where));
    }
    const body = original as (...args: unknown[]) => unknown;
    const wrapper = function (this: unknown, ...args: unknown[]): Promise<unknown> {
      const locks = injectedLockService(this) as Partial<LeaderSource> | undefined;
      if (typeof locks?.leadership !== 'function') {
        return Promise.reject(new RedisLockError(leaderMessages.notBound(where)));
      }
      const leadership = locks.leadership(role);
      if (!leadership) return Promise.resolve(undefined); // not campaigning (yet, or any more)
      return leadership.run(() => body.apply(this, args));
    };
    // Keep what decorators below this one stored on the original (@Cron, @Interval, …).
    for (const key of Reflect.getOwnMetadataKeys(original)) {
      Reflect.defineMetadata(key, Reflect.getOwnMetadata(key, original), wrapper);
    }
    Object.defineProperty(wrapper, 'name', { value: body.name });
    Reflect.defineMetadata(WHEN_LEADER_METADATA, role, wrapper);
    // Mutate the descriptor (never return a new one), so decorators above see the wrapper.
    (descriptor as PropertyDescriptor).value = wrapper;
    injectLockSource(target);
  };
}

/** The role a `@WhenLeader` method follows, if it is one. */
export function whenLeaderRole(method: unknown): string | undefined {
  if (typeof method !== 'function') return undefined;
  return Reflect.getMetadata(WHEN_LEADER_METADATA, method) as string | undefined;
}
