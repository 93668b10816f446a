import { nextFenceLua } from '../../lua/fence.lua';
import { LuaScript } from '../../lua/lua-script';
import { coverLeasesLua, nowMsLua, otherKindLua, prunePermitsLua } from '../../lua/permit.lua';
import { syncPermitHoldersLua, writeShareHolderLua } from '../../lua/share-holders.lua';

/**
 * One try for a permit of a semaphore, in one atomic step: answers busy while another kind holds
 * the lock's name (see otherKindLua), drops lapsed permits, refuses a limit other than the one the
 * current holders took the key with, then grants a place or answers busy.
 * Keys: the permits (the lock's name: ZSET token → lease end), the limit (STRING), the fence
 * counter, the permits' holder records (HASH, see share-holders.lua).
 * Args: the token, the lease in ms, the limit N, how long (ms) the counter outlives the leases,
 * this process's instance id (its holder record).
 * Returns the fence (> 0) when granted (a re-sent grant keeps its place, with a new fence); -(ms
 * until the soonest lease ends) when all N places are taken, or until another kind's holder may
 * leave (0: in this ms); `{limit}` when the holders took the key with another limit.
 */
export const permitAcquireScript = new LuaScript<
  readonly [permitsKey: string, limitKey: string, fenceKey: string, holdersKey: string],
  readonly [
    token: string,
    leaseMs: number,
    permits: number,
    fenceRetentionMs: number,
    instanceId: string,
  ],
  number | [heldLimit: number]
>(
  'permit-acquire',
  `
local permitsKey, limitKey, fenceKey, holdersKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local token, leaseMs, permits = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local fenceRetentionMs, instanceId = tonumber(ARGV[4]), ARGV[5]
${nowMsLua}${otherKindLua('permitsKey', 'limitKey')}
if othersLeft then return -othersLeft end
${prunePermitsLua('permitsKey')}${syncPermitHoldersLua('permitsKey', 'holdersKey')}
local held = redis.call('ZCARD', permitsKey)
if held > 0 then
  -- Holders that disagree about N would each count against their own limit: refuse instead.
  local limit = tonumber(redis.call('GET', limitKey))
  if limit and limit ~= permits then return { limit } end
  -- Our own grant, executed again (ioredis re-sent it after a reset) keeps its place and is
  -- granted anew below: the first fence never reached us, and the counter as it stands may be a
  -- later holder's fence — two holders must never share one.
  if held >= permits and not redis.call('ZSCORE', permitsKey, token) then
    local first = redis.call('ZRANGE', permitsKey, 0, 0, 'WITHSCORES')
    return -math.max(0, tonumber(first[2]) - now)
  end
end
redis.call('ZADD', permitsKey, string.format('%d', now + leaseMs), token)
redis.call('SET', limitKey, string.format('%d', permits))
${writeShareHolderLua('holdersKey', 'token', 'instanceId', 'clock')}${nextFenceLua('fenceKey', 'leaseMs + fenceRetentionMs')}${coverLeasesLua('permitsKey', 'limitKey', 'holdersKey', { key: 'fenceKey', retention: 'fenceRetentionMs' })}
return fence
`,
);
