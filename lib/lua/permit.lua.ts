import { foreignSharesLua, shareTypeLua } from './lock-type.lua';
import { markWaitedLua } from './waited.lua';

/**
 * Lua shared by the semaphore scripts. A semaphore is a sorted set of its holders' tokens, each
 * scored with its lease end in ms on Redis' clock, under the lock's own name, beside its limit (a
 * string) and its fence counter; the three share one hash tag, so one script reaches them on a
 * Cluster too. The limit is what tells the permits from a read lock's readers, the other sorted
 * set that may hold the name (see lock-type.lua).
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
 * granted. The limit's PEXPIRE is the set's, so it never outlives the set (see lock-type.lua).
 * Without `fence` (a release, whose counter keeps the lifetime its grants gave it) the counter is
 * left alone.
 */
export const coverLeasesLua = (
  permitsKey: string,
  limitKey: string,
  holdersKey: string,
  fence?: { key: string; retention: string },
): string => `
do
  local last = redis.call('ZRANGE', ${permitsKey}, -1, -1, 'WITHSCORES')
  if last[2] then
    local left = math.max(1, tonumber(last[2]) - now)
    redis.call('PEXPIRE', ${permitsKey}, string.format('%d', left))
    redis.call('PEXPIRE', ${limitKey}, string.format('%d', left))
    redis.call('PEXPIRE', ${holdersKey}, string.format('%d', left))
${
  fence
    ? `    redis.call('PEXPIRE', ${fence.key}, string.format('%d', left + ${fence.retention}))
`
    : ''
}  end
end
`;

/**
 * What a permit's try reads first: whether another kind holds the lock's name. Sets `othersLeft`
 * to the ms until it may be free — a mutex's or writer's PTTL (a string), the last live reader's
 * lease (a sorted set without the permits' limit beside it) — or leaves it nil when the permits
 * hold the name or nobody does. Any other type of value raises WRONGTYPE in the permit commands
 * that follow, as a foreign value under a lock's name always has. Reads `now`.
 */
export const otherKindLua = (permitsKey: string, limitKey: string): string => `
local othersLeft
do
${shareTypeLua(permitsKey, limitKey)}
  if lockType == 'string' then
    -- A mutex's or writer's lease: its release must wake us.
    local holder = redis.call('GET', ${permitsKey})
${markWaitedLua(permitsKey, 'holder')}    othersLeft = math.max(0, redis.call('PTTL', ${permitsKey}))
  elseif lockType == 'zset' then
${foreignSharesLua(permitsKey, 'now')}
    if lockType == 'zset' then othersLeft = sharesLeft end
  end
end
`;

/**
 * What a permit's release or extension reads when its token is not in the set: whether the name
 * is the permits' (or nobody's) at all. Another kind's holders there are none of its business —
 * no pruning by the permits' rule, no deletion — so the script answers "not ours" (0) at once.
 */
export const notPermitsLua = (permitsKey: string, limitKey: string): string => `
do
${shareTypeLua(permitsKey, limitKey)}
  if lockType ~= 'permits' and lockType ~= 'none' then return 0 end
end
`;
