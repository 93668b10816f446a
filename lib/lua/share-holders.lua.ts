/**
 * Lua shared by the scripts of readers' shares and semaphore permits: who holds each entry of a
 * sorted set of leases (token → lease end), for inspection only, in a HASH beside it (token →
 * `"<since ms> <instance id>"`, since on Redis' clock). Ownership stays the token in the sorted
 * set alone: a record that is missing (a grant by an older version) or left over changes no
 * compare. The hash lives as long as its set (the same PEXPIRE in the same scripts), loses an
 * entry with it, and goes with its last one.
 */

/**
 * Records `token`'s holder, `instanceId`, unless a record is there already (a re-sent grant keeps
 * its since). `clock` names a `TIME` reply the script read already.
 */
export const writeShareHolderLua = (
  holdersKey: string,
  token: string,
  instanceId: string,
  clock: string,
): string => `
redis.call('HSETNX', ${holdersKey}, ${token},
  string.format('%d', ${clock}[1] * 1000 + math.floor(${clock}[2] / 1000)) .. ' ' .. ${instanceId})
`;

/**
 * Brings the records in line with the set after entries left it (lapsed shares or permits that a
 * script dropped, here or in a writer's script, which does not name the hash): with the set gone,
 * the hash goes; with more records than entries, each record without an entry goes. Costs three
 * O(1) reads when they agree, as they do unless a holder crashed.
 */
export const syncShareHoldersLua = (setKey: string, holdersKey: string): string => `
do
  local entries = redis.call('ZCARD', ${setKey})
  if entries == 0 then
    redis.call('DEL', ${holdersKey})
  elseif redis.call('HLEN', ${holdersKey}) > entries then
    for _, holderToken in ipairs(redis.call('HKEYS', ${holdersKey})) do
      if not redis.call('ZSCORE', ${setKey}, holderToken) then
        redis.call('HDEL', ${holdersKey}, holderToken)
      end
    end
  end
end
`;

/**
 * Sets `found` to the live entries of the set (lease end after `now`, or at it when `atNow`: a
 * permit lives through the ms its lease ends in), flat: ms left, then the record (false when
 * none). Writes nothing.
 */
export const readShareHoldersLua = (
  setKey: string,
  holdersKey: string,
  found: string,
  atNow: boolean,
): string => `
local ${found} = {}
do
  local live = redis.pcall('ZRANGEBYSCORE', ${setKey}, ${atNow ? '' : "'(' .. "}string.format('%d', now), '+inf', 'WITHSCORES')
  if type(live) == 'table' then
    for i = 1, #live, 2 do
      ${found}[#${found} + 1] = tonumber(live[i + 1]) - now
      local record = redis.pcall('HGET', ${holdersKey}, live[i])
      if type(record) ~= 'string' then record = false end
      ${found}[#${found} + 1] = record
    end
  end
end
`;
