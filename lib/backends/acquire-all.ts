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
export function acquireAllOnRedis(
  call: AcquireAllCall,
  keys: readonly LockRedisKeys[],
  tokens: readonly string[],
): Promise<AcquireAllReply> {
  const names: string[] = [];
  for (const k of keys) names.push(k.lock, k.fence);
  return acquireAllScript.run(
    call.client,
    names,
    [call.ttl, call.fenceRetention, ...tokens],
    readAcquireAll,
  );
}

/** The script's reply: `{1, fences…}` granted, `{0, i, ms}` busy (i 1-based). */
function readAcquireAll(reply: number[]): AcquireAllReply {
  if (reply[0] === 1) return { fences: reply.slice(1) };
  return { busy: (reply[1] ?? 1) - 1, retryAfterMs: reply[2] ?? 0 };
}

/** True when every lock of `keys` hashes to one Cluster slot (one script may touch them all). */
export function oneSlot(keys: readonly LockRedisKeys[]): boolean {
  const slots = new Set(keys.map((k) => clusterSlot(k.lock)));
  return slots.size <= 1;
}
