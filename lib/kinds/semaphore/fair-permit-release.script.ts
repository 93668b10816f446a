import { dropWaiterLua, readEntryLua } from './fair-permit.lua';
import { nextFenceLua } from '../../lua/fence.lua';
import { LuaScript } from '../../lua/lua-script';
import { coverLeasesLua, nowMsLua, prunePermitsLua } from '../../lua/permit.lua';
import { shareTypeLua } from '../../lua/lock-type.lua';
import type { PublishCommand } from '../../lua/lua-script';
import { syncPermitHoldersLua, writeShareHolderLua } from '../../lua/share-holders.lua';

/**
 * Fair mode's release of a permit, also run by a waiter that leaves the queue: drops `token`'s
 * permit and queue entry, then hands every free place to the first live waiters in arrival order
 * — a freed place is never free for a newcomer to take while someone queues. Each new holder gets
 * the short lease its entry names (at most its entry's lifetime, and no more than is left of it:
 * a waiter that died since its last refresh keeps the place no longer than that), which it renews
 * at once. An entry that lapsed is passed over, and so is one that asked for another limit (its
 * next try is refused). While another kind holds the lock's name it gives nothing back and hands
 * nothing on (not ours: answered 0, never WRONGTYPE); a leaving waiter still leaves the queue.
 * Keys: as fairPermitAcquireScript. A hand-off writes its new holder's record from the id the
 * waiter queued with (none when it queued under a version that wrote no id). Args: the token, the publish command, how long (ms) the fence
 * counter outlives the leases, the release channel (no KEY: see release.script).
 * Publishes "grant:<token>:<fence>" per hand-off; a release that hands nothing on publishes the
 * releasing token, as a plain release does.
 * Returns 1 when `token` held a live permit (given back or handed on), 0 otherwise.
 */
export const fairPermitReleaseScript = new LuaScript<
  readonly [
    permitsKey: string,
    limitKey: string,
    fenceKey: string,
    queueKey: string,
    waitersKey: string,
    waiterIdsKey: string,
    holdersKey: string,
  ],
  readonly [token: string, publish: PublishCommand, fenceRetentionMs: number, channel: string],
  0 | 1
>(
  'fair-permit-release',
  `
local permitsKey, limitKey, fenceKey, queueKey, waitersKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local waiterIdsKey, holdersKey = KEYS[6], KEYS[7]
local token, publish, fenceRetentionMs, channel = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
${nowMsLua}
-- pcall: a mutex or writer may hold the name (a string) once our permit lapsed.
local ends = redis.pcall('ZSCORE', permitsKey, token)
if type(ends) ~= 'string' then
  ends = false
${shareTypeLua('permitsKey', 'limitKey')}
  if lockType ~= 'permits' and lockType ~= 'none' then
    -- Another kind holds the name: nothing of ours to give back, no place to hand on (its own
    -- release wakes the queue). A waiter leaving still leaves it.
${dropWaiterLua('token')}    return 0
  end
end
redis.call('ZREM', permitsKey, token)
redis.call('HDEL', holdersKey, token)
${dropWaiterLua('token')}${prunePermitsLua('permitsKey')}${syncPermitHoldersLua('permitsKey', 'holdersKey')}
-- A lapsed permit was no longer ours: its place may have been taken meanwhile.
local released = ends ~= false and tonumber(ends) >= now
local held = redis.call('ZCARD', permitsKey)
-- With no holder left, the limit is the one the first live waiter asked for.
local limit = held > 0 and tonumber(redis.call('GET', limitKey)) or nil
local handed = 0
while true do
  local head = redis.call('ZRANGE', queueKey, 0, 0)[1]
  if not head then break end
${readEntryLua('head')}
  local live = lapsesAt > now
  if live and not limit then limit = limitAsked end
  local fits = live and limitAsked == limit
  if fits and held >= limit then break end
  local headId = redis.call('HGET', waiterIdsKey, head)
  ${dropWaiterLua('head')}
  if fits then
    local handoff = math.max(1, math.min(lease, lapsesAt - now))
    redis.call('ZADD', permitsKey, string.format('%d', now + handoff), head)
    if headId then
${writeShareHolderLua('holdersKey', 'head', 'headId', 'clock')}    end
    held, handed = held + 1, handed + 1
${nextFenceLua('fenceKey', 'handoff + fenceRetentionMs')}
    redis.call(publish, channel, 'grant:' .. head .. ':' .. string.format('%d', fence))
  end
end
if handed > 0 then
  redis.call('SET', limitKey, string.format('%d', limit))
${coverLeasesLua('permitsKey', 'limitKey', 'holdersKey', { key: 'fenceKey', retention: 'fenceRetentionMs' })}
elseif held == 0 then
  redis.call('DEL', permitsKey, limitKey, holdersKey)
else
${coverLeasesLua('permitsKey', 'limitKey', 'holdersKey')}end
if not released then return 0 end
if handed == 0 then redis.call(publish, channel, token) end
return 1
`,
);
