/**
 * Lua shared by the scripts that may meet another kind's holders under a lock's one key. The
 * key's type says what holds it: a string is a mutex or a writer (its value is the holder's
 * token); a sorted set is a read lock's readers (token → lease end, ms on Redis' clock). Sets
 * `lockType` to the key's type and `sharesLeft` to the ms until the last live share ends, after
 * dropping the lapsed ones; when none was live the set went with them, and `lockType` is
 * `'none'`. `now` is a Lua expression for the time in ms on Redis' clock, evaluated only when the
 * readers hold the key (a script that reads the clock anyway passes its variable).
 */
export const lockTypeLua = (key: string, now: string): string => `
local lockType, sharesLeft = redis.call('TYPE', ${key})['ok'], 0
if lockType == 'zset' then
  local now = ${now}
  redis.call('ZREMRANGEBYSCORE', ${key}, '-inf', now)
  local last = redis.call('ZRANGE', ${key}, -1, -1, 'WITHSCORES')[2]
  if last then sharesLeft = tonumber(last) - now else lockType = 'none' end
end
`;
