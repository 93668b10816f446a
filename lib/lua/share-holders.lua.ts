import { shareTypeLua } from './lock-type.lua';

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
 * script dropped, here or — readers — in a writer's script, which does not name the hash): with
 * more records than entries, each record without an entry goes (all of them when the set is
 * gone). Costs two O(1) reads when they agree, as they do unless a holder crashed.
 */
export const syncShareHoldersLua = (setKey: string, holdersKey: string): string => `
if redis.call('HLEN', ${holdersKey}) > redis.call('ZCARD', ${setKey}) then
  for _, holderToken in ipairs(redis.call('HKEYS', ${holdersKey})) do
    if not redis.call('ZSCORE', ${setKey}, holderToken) then
      redis.call('HDEL', ${holdersKey}, holderToken)
    end
  end
end
`;

/**
 * Permits: the same, only when `prunePermitsLua` dropped some (`pruned`). Only the permit scripts
 * remove permits, each with its record or after this, and the hash expires with the set (the same
 * PEXPIRE): records cannot drift from the set otherwise.
 */
export const syncPermitHoldersLua = (setKey: string, holdersKey: string): string => `
if pruned > 0 then
${syncShareHoldersLua(setKey, holdersKey)}end
`;

/**
 * The lowest lease end of a live entry, as a ZRANGEBYSCORE/ZCOUNT `min` on the script's `now`: a
 * reader's share lapses in the ms its lease ends (exclusive bound), a permit lives through that ms
 * (`atNow`, inclusive), as a key with that PX would. Inspection, isLocked and the forced release
 * share it, so they agree on who holds.
 */
export const liveFromLua = (atNow: boolean): string =>
  `${atNow ? '' : "'(' .. "}string.format('%d', now)`;

/**
 * Sets `found` to the live entries of the set (`liveFromLua`), flat: ms left, then the record
 * (false when none). Writes nothing.
 */
export const readShareHoldersLua = (
  setKey: string,
  holdersKey: string,
  found: string,
  atNow: boolean,
): string => `
local ${found} = {}
do
  local live = redis.pcall('ZRANGEBYSCORE', ${setKey}, ${liveFromLua(atNow)}, '+inf', 'WITHSCORES')
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

/**
 * Sets `lockType` (see `shareTypeLua`) and `readers` and `permits` to the live shares under `key`
 * of the kind that holds it, as `readShareHoldersLua` lists them (the other one empty): what
 * inspection and the forced release read first. Writes nothing.
 */
export const heldSharesLua = (
  key: string,
  limitKey: string,
  readerHoldersKey: string,
  permitHoldersKey: string,
): string => `${shareTypeLua(key, limitKey)}
local readers, permits = {}, {}
if lockType == 'permits' then
${readShareHoldersLua(key, permitHoldersKey, 'found', true)}  permits = found
else
${readShareHoldersLua(key, readerHoldersKey, 'found', false)}  readers = found
end
`;
