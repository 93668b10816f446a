import { nextFenceLua } from './fence.lua';
import { LuaScript } from './lua-script';

/**
 * Acquire in one round trip and one atomic step (no SETNX-then-EXPIRE window).
 * KEYS[1] lock key, KEYS[2] fence counter (same hash slot).
 * ARGV[1] token, ARGV[2] lease in ms, ARGV[3] how long (ms) the fence counter outlives the lease.
 * Returns the fence (> 0) when granted, or -(holder's PTTL) when busy (0 if it expires now).
 */
export const acquireScript = new LuaScript(
  'acquire',
  `
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
${nextFenceLua('KEYS[2]', 'tonumber(ARGV[2]) + tonumber(ARGV[3])')}
  return fence
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  -- Our own grant, executed again: ioredis re-sent the command after a connection reset lost the
  -- first reply. Nobody else can have moved the counter while we hold the lock, and it lives
  -- at least as long as the lock.
  return tonumber(redis.call('GET', KEYS[2]))
end
-- Busy: tell the caller how long the holder's lease still runs (Redis' clock, not ours).
local pttl = redis.call('PTTL', KEYS[1])
if pttl < 0 then pttl = 0 end
return -pttl
`,
);
