import type { LockRedisKeys } from '../keys/lock-keys';
import { acquireAllScript } from '../lua/acquire-all.script';
import { clusterSlot } from '../redis/cluster-slot';
import type { RedisCommander } from '../redis/redis-client';
import type { AcquireAllReply } from './lock-backend';

/** What one run of the all-or-nothing script needs besides the keys. */
export interface AcquireAllCall {
  readonly client: RedisCommander;
  readonly ttl: number;
  readonly fenceRetention: number;
}

/** Runs `acquireAllScript` for `keys` (`tokens[i]` for `keys[i]`) and reads its reply. */
export async function acquireAllOnRedis(
  call: AcquireAllCall,
  keys: readonly LockRedisKeys[],
  tokens: readonly string[],
): Promise<AcquireAllReply> {
  const names = keys.flatMap((k) => [k.lock, k.fence]);
  const [granted = 0, ...rest] = await acquireAllScript.run(call.client, names, [
    call.ttl,
    call.fenceRetention,
    ...tokens,
  ]);
  if (granted === 1) return { fences: rest };
  const [busy = 1, retryAfterMs = 0] = rest;
  return { busy: busy - 1, retryAfterMs };
}

/** True when every lock of `keys` hashes to one Cluster slot (one script may touch them all). */
export function oneSlot(keys: readonly LockRedisKeys[]): boolean {
  const slots = new Set(keys.map((k) => clusterSlot(k.lock)));
  return slots.size <= 1;
}
