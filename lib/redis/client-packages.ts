import type * as IoredisPackage from 'ioredis';
import type * as NodeRedisPackage from 'redis';

/**
 * The client packages, loaded when first needed: both are optional peers, so an app that has only
 * one installed (or passes its own client) never loads the other.
 */
export type Ioredis = typeof IoredisPackage;
export type NodeRedis = typeof NodeRedisPackage;

const loaded = new Map<string, unknown>();

/** `ioredis`, or undefined when it is not installed. */
export function ioredisPackage(): Ioredis | undefined {
  return optionalPackage<Ioredis>('ioredis');
}

/** `redis` (node-redis v5), or undefined when it is not installed. */
export function nodeRedisPackage(): NodeRedis | undefined {
  return optionalPackage<NodeRedis>('redis');
}

function optionalPackage<T>(name: string): T | undefined {
  if (!loaded.has(name)) loaded.set(name, load(name));
  return loaded.get(name) as T | undefined;
}

function load(name: string): unknown {
  try {
    // A plain require: the package is optional, so it cannot be a static import.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require(name) as unknown;
  } catch (error) {
    // Only the package itself missing means "not installed"; a broken install says so loudly.
    const missing =
      (error as NodeJS.ErrnoException).code === 'MODULE_NOT_FOUND' &&
      String((error as Error).message).includes(`'${name}'`);
    if (missing) return undefined;
    throw error;
  }
}
