import { nextFenceLua, sinceOfTokenLua } from './fence.lua';
import { lockTypeLua } from './lock-type.lua';
import { LuaScript } from './lua-script';
import { isLeaseLua, markWaitedLua } from './waited.lua';

/**
 * Acquires several locks in one atomic step: all of them, or none. Used on one Redis (and on a
 * Cluster when every lock hashes to one slot), where a single script sees every key at once, so
 * two callers asking for overlapping keys in any order can never each hold a part.
 * Keys: for each lock, in order, its lock key and its fence counter: 2 each. A lock key that a
 * read-write lock's readers hold (a sorted set, see lock-type.lua) excludes a writer as a holder
 * does.
 * Args: the lease in ms, how long (ms) a fence counter outlives its lease, then one token per lock
 * (each lease keeps its own, so a release message names one lease; each carries its holder).
 * Returns {1, fence₁, …, fenceₙ} when all are granted (or were already ours: a re-sent command
 * whose first reply was lost), else {0, i, ms}: the first busy lock (1-based), and how long its
 * holder's lease (or its last live reader's) still runs — nothing is written then, except that
 * readers' lapsed shares are dropped.
 */
export const acquireAllScript = new LuaScript<
  readonly string[],
  readonly [leaseMs: number, fenceRetentionMs: number, ...tokens: string[]],
  number[]
>(
  'acquire-all',
  `
local leaseMs, fenceRetentionMs = ARGV[1], ARGV[2]
local count = #KEYS / 2
local function clockMs()
  local t = redis.call('TIME')
  return t[1] * 1000 + math.floor(t[2] / 1000)
end
-- Which locks are ours already (held under this call's token): checked once, then granted.
local ours = {}
for i = 1, count do
  local lockKey = KEYS[2 * i - 1]
${lockTypeLua('lockKey', 'clockMs()')}
  if lockType == 'zset' then return { 0, i, math.max(0, sharesLeft) } end
  if lockType ~= 'none' then
    -- Any other type but a string raises WRONGTYPE in the GET, as a foreign value always has.
    local holder = redis.call('GET', lockKey)
    if not ${isLeaseLua('holder', 'ARGV[2 + i]')} then
      -- Its release must wake us.
${markWaitedLua('lockKey', 'holder')}      local pttl = redis.call('PTTL', lockKey)
      if pttl < 0 then pttl = 0 end
      return { 0, i, pttl }
    end
    ours[i] = true
  end
end
local fences = { 1 }
for i = 1, count do
  local lockKey, fenceKey = KEYS[2 * i - 1], KEYS[2 * i]
  local token = ARGV[2 + i]
  if ours[i] and redis.call('EXISTS', fenceKey) == 1 then
    -- Ours already: this command ran before and its reply was lost. Keep the fence it got.
    redis.call('PEXPIRE', lockKey, leaseMs)
    fences[i + 1] = tonumber(redis.call('GET', fenceKey))
  else
    redis.call('SET', lockKey, token, 'PX', leaseMs)
${nextFenceLua('fenceKey', 'tonumber(leaseMs) + tonumber(fenceRetentionMs)', undefined, sinceOfTokenLua('token'))}
    fences[i + 1] = fence
  end
end
return fences
`,
);
