/**
 * Lua shared by the semaphore scripts. A semaphore is a sorted set of its holders' tokens, each
 * scored with its lease end in ms on Redis' clock, beside its limit (a string) and its fence
 * counter; the three share one hash tag, so one script reaches them on a Cluster too.
 */

/** Sets `now` to Redis' clock in ms. Every lease end is counted on it, never on a client's. */
export const nowMsLua = `
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
`;

/**
 * Drops the permits whose lease ended: a member lives through the ms its lease ends in (as a key
 * whose PTTL reached 0), and is gone after it — so a crashed holder's place frees within its ttl.
 * Sets `pruned` to how many it dropped (their holder records go only then: see share-holders.lua).
 */
export const prunePermitsLua = (permitsKey: string): string => `
local pruned = redis.call('ZREMRANGEBYSCORE', ${permitsKey}, '-inf', '(' .. string.format('%d', now))
`;

/**
 * Makes the sorted set, its limit and its holder records live exactly as long as the latest lease
 * in it, and the fence counter that long plus `retention` (ms, a Lua expression): nothing outlives
 * its use, and no key is cut short under a holder whose lease runs longer than the one just
 * granted.
 */
export const coverLeasesLua = (
  permitsKey: string,
  limitKey: string,
  fenceKey: string,
  retention: string,
  holdersKey: string,
): string => `
do
  local last = redis.call('ZRANGE', ${permitsKey}, -1, -1, 'WITHSCORES')
  if last[2] then
    local left = math.max(1, tonumber(last[2]) - now)
    redis.call('PEXPIRE', ${permitsKey}, string.format('%d', left))
    redis.call('PEXPIRE', ${limitKey}, string.format('%d', left))
    redis.call('PEXPIRE', ${holdersKey}, string.format('%d', left))
    redis.call('PEXPIRE', ${fenceKey}, string.format('%d', left + ${retention}))
  end
end
`;
