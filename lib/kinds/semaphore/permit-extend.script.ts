import { LuaScript } from '../../lua/lua-script';
import { coverLeasesLua, nowMsLua } from '../../lua/permit.lua';

/**
 * Compare-and-renew of one permit: pushes its lease end to now + lease only while the token is
 * still a member and its lease has not ended (a lapsed permit is dropped: its place may be taken).
 * Keys: the permits, the limit, the fence counter, the holder records. Args: the token, the new
 * lease in ms, how long (ms) the counter outlives the leases.
 * Returns 1 when renewed, 0 when the permit is gone (another kind's holders under the name
 * included: not ours, never WRONGTYPE).
 */
export const permitExtendScript = new LuaScript<
  readonly [permitsKey: string, limitKey: string, fenceKey: string, holdersKey: string],
  readonly [token: string, leaseMs: number, fenceRetentionMs: number],
  0 | 1
>(
  'permit-extend',
  `
local permitsKey, limitKey, fenceKey, holdersKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local token, leaseMs, fenceRetentionMs = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
${nowMsLua}
-- pcall: a mutex or writer may hold the name (a string) once our permit lapsed — not ours.
local ends = redis.pcall('ZSCORE', permitsKey, token)
if type(ends) ~= 'string' then return 0 end
if tonumber(ends) < now then
  redis.call('ZREM', permitsKey, token)
  redis.call('HDEL', holdersKey, token)
  return 0
end
redis.call('ZADD', permitsKey, 'XX', string.format('%d', now + leaseMs), token)
${coverLeasesLua('permitsKey', 'limitKey', 'holdersKey', { key: 'fenceKey', retention: 'fenceRetentionMs' })}
return 1
`,
);
