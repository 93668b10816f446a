import { foreignSharesLua, shareTypeLua } from '../../lua/lock-type.lua';
import { LuaScript } from '../../lua/lua-script';
import { coverLua, readFenceLua } from '../../lua/read-fence.lua';
import { syncShareHoldersLua, writeShareHolderLua } from '../../lua/share-holders.lua';
import { markWaitedLua } from '../../lua/waited.lua';

/**
 * A reader's try for its share of a read-write lock, in one round trip. The readers hold the
 * lock's own key, as a sorted set (token → lease end on Redis' clock; see lock-type.lua), so a
 * writer's `SET NX` fails while they do. Refused while a writer holds the key (a string, or any
 * other type of value under it), while a semaphore's permits do (a sorted set with their limit
 * beside it), while a writer waits for it (writer priority: a live entry in the writers' waiting
 * set), or while fair mode's queue of writers exists. Granted: the token joins the readers,
 * lapsed shares of crashed readers are dropped on the way, and the set lives at least as long as
 * the new lease. A reader that starts the set deletes a permits' limit key left over, which would
 * make the set read as permits.
 * Keys: the lock, the writers waiting, fair mode's queue, the fence counter, the readers' holder
 * records, the permits' limit (all in one hash slot).
 * Args: the token, the lease in ms, how long (ms) the fence counter outlives the lease, this
 * process's instance id (its holder record, with the readers' TTL, for inspection).
 * Returns the fence counter as it stands (> 0: see readFenceLua) when granted, or -(ms until
 * another try is worth it) when refused: the writer's lease left, the last permit's (0: it ends
 * in this ms), or when the waiting writer's entry would lapse, or the queue's.
 */
export const readAcquireScript = new LuaScript<
  readonly [
    lockKey: string,
    writersWaitingKey: string,
    queueKey: string,
    fenceKey: string,
    holdersKey: string,
    limitKey: string,
  ],
  readonly [token: string, leaseMs: number, fenceRetentionMs: number, instanceId: string],
  number
>(
  'read-acquire',
  `
local lockKey, waitingKey, queueKey, fenceKey, holdersKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local limitKey = KEYS[6]
local token, leaseMs, fenceRetentionMs = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local instanceId = ARGV[4]
local clock = redis.call('TIME')
local now = clock[1] * 1000 + math.floor(clock[2] / 1000)
${shareTypeLua('lockKey', 'limitKey')}
if lockType == 'permits' then
  -- A semaphore's permits hold it: busy until the last one ends (read, never pruned by our rule).
${foreignSharesLua('lockKey', 'now')}
  if lockType == 'permits' then return -sharesLeft end
end
if lockType ~= 'zset' and lockType ~= 'none' then
  -- A writer holds it (any other type of value raises WRONGTYPE here): its release must wake us.
  local writer = redis.call('GET', lockKey)
${markWaitedLua('lockKey', 'writer')}  local pttl = redis.call('PTTL', lockKey)
  if pttl < 0 then pttl = 0 end
  return -pttl
end
local mine = lockType == 'zset' and redis.call('ZSCORE', lockKey, token)
if not (mine and tonumber(mine) > now) then
  -- Not a re-send of our own grant (ioredis re-sends after a reset): check who is in the way.
  if redis.call('EXISTS', waitingKey) == 1 then
    redis.call('ZREMRANGEBYSCORE', waitingKey, '-inf', now)
    local last = redis.call('ZRANGE', waitingKey, -1, -1, 'WITHSCORES')[2]
    if last then return -(tonumber(last) - now) end
  end
  if redis.call('EXISTS', queueKey) == 1 then
    return -math.max(1, redis.call('PTTL', queueKey))
  end
  if lockType == 'zset' then redis.call('ZREMRANGEBYSCORE', lockKey, '-inf', now) end
${syncShareHoldersLua('lockKey', 'holdersKey')}end
-- A new set of readers: no permits' limit may stand beside it, or permits would join it.
if lockType == 'none' then redis.call('DEL', limitKey) end
redis.call('ZADD', lockKey, now + leaseMs, token)
${writeShareHolderLua('holdersKey', 'token', 'instanceId', 'clock')}${coverLua('lockKey', 'leaseMs')}${coverLua('holdersKey', 'leaseMs')}${readFenceLua('fenceKey', 'clock', 'leaseMs + fenceRetentionMs')}
return fence
`,
);
