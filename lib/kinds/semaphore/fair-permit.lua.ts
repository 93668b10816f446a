/**
 * Lua shared by the fair semaphore scripts. Waiters for a permit queue in a sorted set (token →
 * arrival, µs on Redis' clock) beside a hash of their entries (token → "lapsesAt lease permits":
 * when the entry lapses unless refreshed, the lease a hand-off gives it, and the limit N it asked
 * for), and a hash of their instance ids (token → id, so a hand-off can write its new holder's
 * record, as the fair mutex's `:waiter-ids`), all in the semaphore's hash slot. The scripts that
 * use these pieces name those keys `queueKey`, `waitersKey` and `waiterIdsKey`, and read `now`
 * (ms) from `nowMsLua` first.
 */

/**
 * Sets `lapsesAt`, `lease` and `limitAsked` from the entry of waiter `waiter` (0 each when the
 * entry is missing or garbled: a lapsed entry).
 */
export const readEntryLua = (waiter: string): string => `
local lapsesAt, lease, limitAsked = string.match(
  redis.call('HGET', waitersKey, ${waiter}) or '', '^(%d+) (%d+) (%d+)$')
lapsesAt, lease, limitAsked = tonumber(lapsesAt) or 0, tonumber(lease) or 0, tonumber(limitAsked) or 0
`;

/** Removes `waiter` from the queue, its entry and its instance id. */
export const dropWaiterLua = (waiter: string): string => `
redis.call('ZREM', queueKey, ${waiter})
redis.call('HDEL', waitersKey, ${waiter})
redis.call('HDEL', waiterIdsKey, ${waiter})
`;

/**
 * Counts the live waiters queued ahead of `token`, from the head, up to `free` of them (the free
 * places they keep): sets `ahead`, `soonestLapse`, the earliest time one of those lapses, and
 * `askedAhead`, the limit N the first of them asked for. Lapsed entries met on the way are
 * dropped: a waiter that stopped refreshing (crashed, or left without saying so) keeps no place.
 */
export const waitersAheadLua = `
local ahead, soonestLapse, askedAhead, index = 0, nil, nil, 0
while ahead < free do
  local waiter = redis.call('ZRANGE', queueKey, index, index)[1]
  if not waiter or waiter == token then break end
  ${readEntryLua('waiter')}
  if lapsesAt > now then
    ahead, index = ahead + 1, index + 1
    askedAhead = askedAhead or limitAsked
    if not soonestLapse or lapsesAt < soonestLapse then soonestLapse = lapsesAt end
  else
    ${dropWaiterLua('waiter')}
  end
end
`;

/**
 * Queues `token` (or keeps its place and renews its entry) when the busy try asked to
 * (`queueIfBusy`): arrival order on Redis' clock, the entry "lapsesAt lease permits", and the
 * waiter's instance id. Reads `clock`, `now`, `leaseMs`, `permits`, `entryLifetimeMs`,
 * `instanceId`.
 */
export const queueWaiterLua = `
if queueIfBusy == '1' then
  -- Arrival order: a waiter keeps its place across refreshes (NX); its entry is renewed.
  redis.call('ZADD', queueKey, 'NX', string.format('%d', clock[1] * 1000000 + clock[2]), token)
  local entry = string.format('%d %d %d', now + entryLifetimeMs,
    math.min(leaseMs, entryLifetimeMs), permits)
  redis.call('HSET', waitersKey, token, entry)
  redis.call('HSET', waiterIdsKey, token, instanceId)
  -- The queue outlives no waiter: it goes when the last entry would have lapsed.
  for _, key in ipairs({ queueKey, waitersKey, waiterIdsKey }) do
    if redis.call('PTTL', key) < entryLifetimeMs then
      redis.call('PEXPIRE', key, entryLifetimeMs)
    end
  end
end
`;
