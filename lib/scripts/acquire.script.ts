import { LuaScript } from './lua-script';

/**
 * Acquire in one round trip and one atomic step (no SETNX-then-EXPIRE window).
 * KEYS[1] lock key, KEYS[2] fence counter (same hash slot).
 * ARGV[1] token, ARGV[2] lease in ms.
 * Returns the new fence (> 0) when granted, or -(holder's PTTL) when busy (0 if it expires now).
 */
export const acquireScript = new LuaScript(
  'acquire',
  `
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  -- Granted: the fence counter never expires, so fences stay strictly increasing per key.
  return redis.call('INCR', KEYS[2])
end
-- Busy: tell the caller how long the holder's lease still runs (Redis' clock, not ours).
local pttl = redis.call('PTTL', KEYS[1])
if pttl < 0 then pttl = 0 end
return -pttl
`,
  2,
);
