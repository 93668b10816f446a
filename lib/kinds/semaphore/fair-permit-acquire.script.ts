import { dropWaiterLua, queueWaiterLua, waitersAheadLua } from './fair-permit.lua';
import { nextFenceLua } from '../../lua/fence.lua';
import { LuaScript } from '../../lua/lua-script';
import { coverLeasesLua, nowMsLua, otherKindLua, prunePermitsLua } from '../../lua/permit.lua';
import { syncPermitHoldersLua, writeShareHolderLua } from '../../lua/share-holders.lua';

/**
 * Fair mode's try for a permit of a semaphore: first come, first served. A free place goes to a
 * waiter only when fewer live waiters queue ahead of it than there are free places (each keeps
 * one), so a later waiter never takes the place of an earlier one; a release hands freed places
 * to the head of the queue directly (`fairPermitReleaseScript`). While another kind holds the
 * lock's name (see otherKindLua) the try is busy, and queues as for a full semaphore.
 * Keys: the permits (the lock's name: ZSET token → lease end), the limit, the fence counter, the queue (ZSET token
 * → arrival, µs), the waiters' entries (HASH, see fair-permit.lua), the waiters' instance ids
 * (HASH token → id), the permits' holder records (HASH, see share-holders.lua). All in one hash
 * slot.
 * Args: the token (one per acquire call: its place in the queue and, once granted, its permit),
 * the lease in ms, the limit N, '1' to queue (or stay queued) when busy, the entry lifetime in ms,
 * how long (ms) the fence counter outlives the leases, this process's instance id (its holder
 * record once granted; while queued, kept for the hand-off to write).
 * Returns the fence (> 0) when granted; {-(ms until worth retrying), fence counter} when busy;
 * {limit} when the holders — or, with none left, the first live waiter — named another limit.
 */
export const fairPermitAcquireScript = new LuaScript<
  readonly [
    permitsKey: string,
    limitKey: string,
    fenceKey: string,
    queueKey: string,
    waitersKey: string,
    waiterIdsKey: string,
    holdersKey: string,
  ],
  readonly [
    token: string,
    leaseMs: number,
    permits: number,
    queueIfBusy: '1' | '0',
    entryLifetimeMs: number,
    fenceRetentionMs: number,
    instanceId: string,
  ],
  number | [heldLimit: number] | [negativeRetryMs: number, fence: number]
>(
  'fair-permit-acquire',
  `
local permitsKey, limitKey, fenceKey, queueKey, waitersKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local waiterIdsKey, holdersKey = KEYS[6], KEYS[7]
local token, leaseMs, permits = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local queueIfBusy, entryLifetimeMs = ARGV[4], tonumber(ARGV[5])
local fenceRetentionMs, instanceId = tonumber(ARGV[6]), ARGV[7]
${nowMsLua}${otherKindLua('permitsKey', 'limitKey')}
if othersLeft then
  -- Another kind holds the name: busy, in the queue as for full permits (its release wakes us).
${queueWaiterLua}  return { -othersLeft, tonumber(redis.call('GET', fenceKey)) or 0 }
end
${prunePermitsLua('permitsKey')}${syncPermitHoldersLua('permitsKey', 'holdersKey')}
local held = redis.call('ZCARD', permitsKey)
if held > 0 then
  -- Holders that disagree about N would each count against their own limit: refuse instead.
  local limit = tonumber(redis.call('GET', limitKey))
  if limit and limit ~= permits then return { limit } end
end
-- Already ours (a release handed it to us and its message has not reached us, or this try was
-- re-sent): granted anew below, with a fence of its own — the counter as it stands may be a
-- later holder's, and two holders must never share one.
if not redis.call('ZSCORE', permitsKey, token) then
  local free = permits - held
${waitersAheadLua}
  -- With no holder left, the limit is the one the first live waiter asked for (a release hands
  -- it places under that limit): a newcomer naming another N is refused, as holders refuse it.
  if held == 0 and askedAhead and askedAhead ~= permits then return { askedAhead } end
  if ahead >= free then
    -- Busy: until the soonest lease ends (all N held), or until a waiter keeping a free place
    -- lapses, whichever comes first.
    local retry
    if held > 0 then
      retry = tonumber(redis.call('ZRANGE', permitsKey, 0, 0, 'WITHSCORES')[2]) - now
    end
    if soonestLapse and (not retry or soonestLapse - now < retry) then retry = soonestLapse - now end
${queueWaiterLua}    return { -math.max(0, retry or 0), tonumber(redis.call('GET', fenceKey)) or 0 }
  end
end
${dropWaiterLua('token')}
redis.call('ZADD', permitsKey, string.format('%d', now + leaseMs), token)
redis.call('SET', limitKey, string.format('%d', permits))
${writeShareHolderLua('holdersKey', 'token', 'instanceId', 'clock')}${nextFenceLua('fenceKey', 'leaseMs + fenceRetentionMs')}${coverLeasesLua('permitsKey', 'limitKey', 'holdersKey', { key: 'fenceKey', retention: 'fenceRetentionMs' })}
return fence
`,
);
