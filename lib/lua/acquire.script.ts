import { nextFenceLua } from './fence.lua';
import { writeHolderLua } from './holder.lua';
import { LuaScript } from './lua-script';

/**
 * Acquire in one round trip and one atomic step (no SETNX-then-EXPIRE window).
 * Keys: the lock key, its fence counter, its holder record (same hash slot).
 * Args: the token, the lease in ms, how long (ms) the fence counter outlives the lease, the
 * holder's instance id (written beside the lease with the same PX, for inspection).
 * Returns the fence (> 0) when granted, or -(holder's PTTL) when busy (0 if it expires now).
 */
export const acquireScript = new LuaScript<
  readonly [lockKey: string, fenceKey: string, holderKey: string],
  readonly [token: string, leaseMs: number, fenceRetentionMs: number, instanceId: string],
  number
>(
  'acquire',
  `
local lockKey, fenceKey, holderKey = KEYS[1], KEYS[2], KEYS[3]
local token, leaseMs, fenceRetentionMs, instanceId = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
if redis.call('SET', lockKey, token, 'NX', 'PX', leaseMs) then
${writeHolderLua('holderKey', 'token', 'instanceId', 'leaseMs')}${nextFenceLua('fenceKey', 'tonumber(leaseMs) + tonumber(fenceRetentionMs)')}
  return fence
end
if redis.call('GET', lockKey) == token then
  -- Our own grant, executed again: ioredis re-sent the command after a connection reset lost the
  -- first reply. Nobody else can have moved the counter while we hold the lock, and it lives
  -- at least as long as the lock.
  return tonumber(redis.call('GET', fenceKey))
end
-- Busy: tell the caller how long the holder's lease still runs (Redis' clock, not ours).
local pttl = redis.call('PTTL', lockKey)
if pttl < 0 then pttl = 0 end
return -pttl
`,
);
