import type { LockHandle } from '../engine/lock-handle';
import type { AcquireOptions } from '../options/lock-call-options';
import type { ResolvedRedisLockOptions } from '../options/redis-lock-options';
import { DEFAULT_OPTIONS } from '../options/option-defaults';
import { HandleLease } from './handle-lease';
import { frameKeyOf } from './lease-frames';
import { isKeyList, type LockSource, type LockTarget } from './lock-source';
import { leaseKindOf } from '../options/permits-option';

/**
 * Marks a lock source holds use as it is: this package's own `LockService` (its locks are the
 * engine's), and the adapters made here. From the global symbol registry, so another copy of the
 * package is recognised too.
 */
const INTERNAL = Symbol.for('nestjs-redis-lock:internal-lock-source');

/** A lock source with every module option, as `LockService` has them. */
export interface ServiceLockSource extends LockSource {
  readonly options: ResolvedRedisLockOptions;
}

/**
 * What `@Locked` may be given in place of a `LockService` (a test double): its public `acquire`,
 * and module options if it has any. Anything else it has is not used.
 */
interface PublicLockSource {
  readonly options?: Partial<ResolvedRedisLockOptions>;
  acquire(key: LockTarget, options: AcquireOptions): Promise<LockHandle>;
}

/** Adapters of the doubles seen so far: one per double, so re-entrancy is per double too. */
const adapters = new WeakMap<object, ServiceLockSource>();
let doublesSeen = 0;

/** Brands `LockService.prototype`: `lockSourceFor` hands its instances back as they are. */
export function markInternalLockSource(prototype: object): void {
  Object.defineProperty(prototype, INTERNAL, { value: true });
}

/**
 * True for this package's own `LockService` (or an adapter of a double), false for a double —
 * also for one made from its prototype (`sinon.createStubInstance`), which has no engine.
 */
export function isInternalLockSource(source: object): boolean {
  const branded = source as { [INTERNAL]?: unknown; engine?: unknown };
  return branded[INTERNAL] === true && branded.engine != null;
}

/**
 * The lock source `@Locked` uses for `source`: a real `LockService` as it is (no allocation), a
 * double through an adapter that calls its public `acquire` only, takes the module options it
 * lacks from the library defaults, and hands holds the handle through `LockHandle` alone.
 */
export function lockSourceFor(source: object): ServiceLockSource {
  if (isInternalLockSource(source)) return source as ServiceLockSource;
  let adapter = adapters.get(source);
  if (!adapter) {
    adapter = adapt(source as PublicLockSource);
    adapters.set(source, adapter);
  }
  return adapter;
}

function adapt(double: PublicLockSource): ServiceLockSource {
  // Apart from every other source's in a call chain's frame (`\0` starts no lock key).
  const namespace = `\0double${++doublesSeen}:`;
  // One name per key whatever the kind, as the engine keeps them: a nested call of another kind
  // finds the chain's hold and is refused, as it is against the real service.
  const engine = {
    keysOf: (key: string) => ({ lock: namespace + key }),
  };
  const adapter: ServiceLockSource = {
    options: { ...DEFAULT_OPTIONS, ...optionsOf(double) },
    engine,
    async acquire(key: LockTarget, options: AcquireOptions) {
      const handle: LockHandle | undefined = await double.acquire(key, options);
      if (!isKeyList(key)) {
        const frameKey = frameKeyOf(adapter, key, options);
        return new HandleLease(handle, key, engine, frameKey, undefined, leaseKindOf(options));
      }
      const names = key.map((one) => engine.keysOf(one).lock);
      return new HandleLease(handle, key.join(', '), engine, names[0] ?? namespace, names);
    },
  };
  // An adapter bound to an instance (`bindLockSource`) is found again as it is, not re-adapted.
  markInternalLockSource(adapter);
  return adapter;
}

/** The double's module options, if it has any: a stub's inherited getter may throw. */
function optionsOf(double: PublicLockSource): Partial<ResolvedRedisLockOptions> | undefined {
  try {
    return double.options;
  } catch {
    return undefined;
  }
}
