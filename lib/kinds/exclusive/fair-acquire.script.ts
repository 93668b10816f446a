import { nextFenceLua } from '../../lua/fence.lua';
import { writeHolderLua } from '../../lua/holder.lua';
import { LuaScript } from '../../lua/lua-script';
import { lockTypeLua } from '../../lua/lock-type.lua';
import { markWaitedLua, unmarkedLua, WAITED_MARK } from '../../lua/waited.lua';

/**
 * Fair mode's acquire: first come, first served. Waiters queue in Redis; a free lock goes to the
 * head of the queue only, and a release hands it to the head directly (`fairReleaseScript`).
 * Keys: the lock, its fence counter, the queue (ZSET token → arrival, Redis µs), the waiters
 * (HASH token → "expiresAt lease": when its entry lapses unless refreshed, and the lease a
 * hand-off gives it, min(ttl, entry lifetime) — the waiter's own figure, so it knows the lease it
 * was handed whoever releases), the holder record, the waiters' instance ids (HASH token → id, so
 * a hand-off can write its new holder's record; kept apart from the entries, whose format older
 * versions parse). All in one hash slot. A read-write lock's readers and a semaphore's permits
 * hold the lock key itself, as a sorted set (see lock-type.lua): a writer is refused while a live
 * one holds a share or a permit.
 * Args: the token (one per acquire call: its place in the queue), the lease in ms, '1' to queue
 * (or stay queued) when busy, the waiter entry lifetime in ms, how long (ms) the fence counter
 * outlives a lease it grants, this process's instance id.
 * A free lock with no queue costs what default mode's acquire does, plus one existence check.
 * Returns the fence (> 0) when granted now; {fence, pttl} when the lock is already ours (handed
 * to us by a release, or this is a re-send); {-(ms until worth retrying), fence counter} when
 * busy (the counter tells the caller which hand-offs to it are already history).
 */
export const fairAcquireScript = new LuaScript<
  readonly [
    lockKey: string,
    fenceKey: string,
    queueKey: string,
    waitersKey: string,
    holderKey: string,
    waiterIdsKey: string,
  ],
  readonly [
    token: string,
    leaseMs: number,
    queueIfBusy: '1' | '0',
    entryLifetimeMs: number,
    fenceRetentionMs: number,
    instanceId: string,
  ],
  number | [number, number]
>(
  'fair-acquire',
  `
local lockKey, fenceKey, queueKey, waitersKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local holderKey, waiterIdsKey = KEYS[5], KEYS[6]
local token, leaseMs, queueIfBusy = ARGV[1], ARGV[2], ARGV[3]
local entryLifetimeMs, fenceRetentionMs, instanceId = ARGV[4], ARGV[5], ARGV[6]
-- Nobody queues: nothing to be fair to, so default mode's grant (one existence check, then
-- set-if-absent, which readers' shares under the key refuse too). No queue: this token is in
-- none. Held, ours included: the full path below.
if redis.call('EXISTS', queueKey) == 0
  and redis.call('SET', lockKey, token, 'NX', 'PX', leaseMs) then
  -- The token names its holder, as a plain grant's does: no record beside it.
${nextFenceLua('fenceKey', 'tonumber(leaseMs) + tonumber(fenceRetentionMs)')}
  return fence
end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
-- Drop waiters that stopped refreshing their entry (crashed, or left without saying so).
while true do
  local head = redis.call('ZRANGE', queueKey, 0, 0)[1]
  if not head then break end
  local entry = redis.call('HGET', waitersKey, head)
  if entry and (tonumber(string.match(entry, '^%d+')) or 0) > now then break end
  redis.call('ZREM', queueKey, head)
  redis.call('HDEL', waitersKey, head)
  redis.call('HDEL', waiterIdsKey, head)
end
-- Readers of a read-write lock or a semaphore's permits hold it: the head waits for the last
-- live one to leave (which wakes it); new readers meanwhile are refused while this queue exists.
-- Any other type but a string raises WRONGTYPE in the GET, as a foreign value under our name
-- always has.
${lockTypeLua('lockKey', 'now')}
local holder, shared, sharesLeftMs = false, lockType == 'zset', sharesLeft
if lockType ~= 'zset' and lockType ~= 'none' then
  holder = redis.call('GET', lockKey)
  if holder ~= token and ${unmarkedLua('holder')} ~= token then
    -- Another's lease (a default-mode holder's too, on the same name): its release must wake us.
${markWaitedLua('lockKey', 'holder')}  end
  holder = ${unmarkedLua('holder')}
end
if holder == token then
  return { tonumber(redis.call('GET', fenceKey)) or 0, redis.call('PTTL', lockKey) }
end
local head = redis.call('ZRANGE', queueKey, 0, 0)[1]
if not holder and not shared and (not head or head == token) then
  redis.call('ZREM', queueKey, token)
  redis.call('HDEL', waitersKey, token)
  redis.call('HDEL', waiterIdsKey, token)
  -- Granted here, a queue existed (or lapsed shares were in the way): the lease starts marked as
  -- waited for, so its release hands over to whoever is still in line, or wakes the readers the
  -- queue held back. (A spare PUBLISH at worst.)
  redis.call('SET', lockKey, '${WAITED_MARK}' .. token, 'PX', leaseMs)
${writeHolderLua('holderKey', 'token', 'instanceId', 'leaseMs', 't')}${nextFenceLua('fenceKey', 'tonumber(leaseMs) + tonumber(fenceRetentionMs)', 't')}
  return fence
end
local retry
if holder then
  retry = redis.call('PTTL', lockKey)
elseif shared then
  retry = sharesLeftMs
else
  -- Free, but reserved for the head of the queue: it takes it now, or its entry lapses.
  retry = (tonumber(string.match(redis.call('HGET', waitersKey, head) or '', '^%d+')) or now) - now
end
if queueIfBusy == '1' then
  if not redis.call('ZSCORE', queueKey, token) then
    redis.call('ZADD', queueKey, t[1] * 1000000 + t[2], token)
  end
  local handoffLease = math.min(tonumber(leaseMs), tonumber(entryLifetimeMs))
  local entry = string.format('%d %d', now + tonumber(entryLifetimeMs), handoffLease)
  redis.call('HSET', waitersKey, token, entry)
  redis.call('HSET', waiterIdsKey, token, instanceId)
  -- Its own check, not the queue's: a hash first written beside an older version's queue would
  -- otherwise be left without a TTL.
  if redis.call('PTTL', waiterIdsKey) < tonumber(entryLifetimeMs) then
    redis.call('PEXPIRE', waiterIdsKey, entryLifetimeMs)
  end
  -- The queue outlives no waiter: it goes when the last entry would have lapsed.
  if redis.call('PTTL', queueKey) < tonumber(entryLifetimeMs) then
    redis.call('PEXPIRE', queueKey, entryLifetimeMs)
    redis.call('PEXPIRE', waitersKey, entryLifetimeMs)
  end
end
if retry < 0 then retry = 0 end
return { -retry, tonumber(redis.call('GET', fenceKey)) or 0 }
`,
);
