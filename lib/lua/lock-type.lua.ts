/**
 * Lua shared by the scripts that may meet another kind's holders under a lock's one key. The
 * key's type says what holds it: a string is a mutex or a writer (its value is the holder's
 * token); a sorted set is a read lock's readers or a semaphore's permits (token → lease end, ms
 * on Redis' clock), the permits when their limit key is beside it (see `LockRedisKeys.permitLimit`:
 * it exists exactly while they do, and a new set of readers deletes one left over).
 */

/**
 * Sets `lockType` to the key's type, `'permits'` for a semaphore's sorted set: what a script that
 * can join one of the two sets (a reader's, a permit's) reads first.
 */
export const shareTypeLua = (key: string, limitKey: string): string => `
local lockType, sharesLeft = redis.call('TYPE', ${key})['ok'], 0
if lockType == 'zset' and redis.call('EXISTS', ${limitKey}) == 1 then lockType = 'permits' end
`;

/**
 * For a sorted set of another kind's shares under `key` (`lockType` names it): sets `sharesLeft`
 * to the ms until its last lease ends, reading the set only — its own kind's scripts prune it,
 * each by its own rule, and keep its records. A share counts while either kind's rule says it
 * lives (a reader's lapses in the ms its lease ends, a permit's lives through it), so no holder
 * of either is cut short; a set whose every lease ended before this ms holds nobody under either
 * rule: it is deleted and `lockType` becomes `'none'`. `now` is a Lua expression for the time in
 * ms on Redis' clock, evaluated only here.
 */
export const foreignSharesLua = (key: string, now: string): string => `
do
  local now = ${now}
  local last = tonumber(redis.call('ZRANGE', ${key}, -1, -1, 'WITHSCORES')[2])
  if last and last >= now then
    sharesLeft = last - now
  else
    redis.call('DEL', ${key})
    lockType = 'none'
  end
end
`;

/**
 * What the scripts of a mutex or a writer read once their `SET NX` failed, which join no set:
 * sets `lockType` to the key's type (`'zset'` for readers and permits alike, which keep them out
 * the same way) and, for a set, `sharesLeft` as `foreignSharesLua` does.
 */
export const lockTypeLua = (key: string, now: string): string => `
local lockType, sharesLeft = redis.call('TYPE', ${key})['ok'], 0
if lockType == 'zset' then
${foreignSharesLua(key, now)}end
`;
