import { nextFenceLua } from './fence.lua';
import { LuaScript } from './lua-script';

/**
 * Acquires several locks in one atomic step: all of them, or none. Used on one Redis (and on a
 * Cluster when every lock hashes to one slot), where a single script sees every key at once, so
 * two callers asking for overlapping keys in any order can never each hold a part.
 * Keys: for each lock, in order, its lock key, its fence counter and its readers (the shares of a
 * read-write lock's readers, which exclude a writer as a holder does): 3 each.
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
local count = #KEYS / 3
for i = 1, count do
  local lockKey, readersKey = KEYS[3 * i - 2], KEYS[3 * i]
  local current = redis.call('GET', lockKey)
  if current and current ~= ARGV[2 + i] then
    local pttl = redis.call('PTTL', lockKey)
    if pttl < 0 then pttl = 0 end
    return { 0, i, pttl }
  end
  if not current and redis.call('EXISTS', readersKey) == 1 then
    -- Readers hold it: busy until the last live one's lease ends (lapsed shares do not count).
    local t = redis.call('TIME')
    local now = t[1] * 1000 + math.floor(t[2] / 1000)
    redis.call('ZREMRANGEBYSCORE', readersKey, '-inf', now)
    local last = redis.call('ZRANGE', readersKey, -1, -1, 'WITHSCORES')[2]
    if last then return { 0, i, math.max(0, tonumber(last) - now) } end
  end
end
local fences = { 1 }
for i = 1, count do
  local lockKey, fenceKey = KEYS[3 * i - 2], KEYS[3 * i - 1]
  local token = ARGV[2 + i]
  if redis.call('GET', lockKey) == token and redis.call('EXISTS', fenceKey) == 1 then
    -- Ours already: this command ran before and its reply was lost. Keep the fence it got.
    redis.call('PEXPIRE', lockKey, leaseMs)
    fences[i + 1] = tonumber(redis.call('GET', fenceKey))
  else
    redis.call('SET', lockKey, token, 'PX', leaseMs)
${nextFenceLua('fenceKey', 'tonumber(leaseMs) + tonumber(fenceRetentionMs)')}
    fences[i + 1] = fence
  end
end
return fences
`,
);
