import { nextFenceLua } from './fence.lua';
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
 * Each free key is taken at once (`SET NX PX`); only a key that is not free is looked at (who
 * holds it), and then the keys this run took are given back (`DEL`): uncontended, two keys cost
 * their two `SET`s and their fence counters, nothing more (new counters all start from one
 * reading of Redis' clock). A holder found in the way is marked as
 * waited for (waited.lua), as a single key's refused try marks it.
 * Returns {1, fence₁, …, fenceₙ} when all are granted (or were already ours: a re-sent command
 * whose first reply was lost), else {0, i, ms}: the first busy lock (1-based), and how long its
 * holder's lease (or its last live reader's) still runs — nothing of this run is left then, but
 * that mark, and readers' lapsed shares dropped on the way.
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
-- Redis' clock, read once per run at most: several new fence counters start from one reading.
local clock
local function serverTime()
  clock = clock or redis.call('TIME')
  return clock
end
local function clockMs()
  local t = serverTime()
  return t[1] * 1000 + math.floor(t[2] / 1000)
end
-- The keys this run took (given back if a later one is busy), and those ours already.
local taken, ours = {}, {}
for i = 1, count do
  local lockKey, token = KEYS[2 * i - 1], ARGV[2 + i]
  local busy
  if redis.call('SET', lockKey, token, 'NX', 'PX', leaseMs) then
    taken[#taken + 1] = lockKey
  else
${lockTypeLua('lockKey', 'clockMs()')}
    if lockType == 'zset' then
      busy = math.max(0, sharesLeft)
    elseif lockType == 'none' then
      -- Only lapsed shares of crashed readers were in the way, and they are gone now.
      redis.call('SET', lockKey, token, 'PX', leaseMs)
      taken[#taken + 1] = lockKey
    else
      -- Any other type but a string raises WRONGTYPE in the GET, as a foreign value always has.
      local holder = redis.call('GET', lockKey)
      if ${isLeaseLua('holder', 'token')} then
        ours[i] = true
      else
        -- Its release must wake us.
${markWaitedLua('lockKey', 'holder')}        busy = math.max(0, redis.call('PTTL', lockKey))
      end
    end
  end
  if busy then
    for _, key in ipairs(taken) do redis.call('DEL', key) end
    return { 0, i, busy }
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
    if ours[i] then redis.call('SET', lockKey, token, 'PX', leaseMs) end
${nextFenceLua('fenceKey', 'tonumber(leaseMs) + tonumber(fenceRetentionMs)', 'serverTime()')}
    fences[i + 1] = fence
  end
end
return fences
`,
);
