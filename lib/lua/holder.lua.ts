/**
 * Lua, shared by the scripts that grant a lock: records who holds it —
 * `"<since> <token> <instance id>"`, since in ms on Redis' clock — under `holderKey`, expiring
 * with the lease (`leaseMs`, a Lua expression). It is read by inspection only: ownership is still
 * the token in the lock key alone, so a record that is missing (a grant by an older version) or
 * stale changes no compare. The token in it lets a reader tell a record of the current grant from
 * one left over (an older version's forced release deletes the lock key only); it never leaves
 * the scripts. `clock` names a `TIME` reply the script read already for this grant.
 */
export const writeHolderLua = (
  holderKey: string,
  token: string,
  instanceId: string,
  leaseMs: string,
  clock?: string,
): string => `
do
  local clock = ${clock ?? "redis.call('TIME')"}
  local since = string.format('%d', clock[1] * 1000 + math.floor(clock[2] / 1000))
  redis.call('SET', ${holderKey}, since .. ' ' .. ${token} .. ' ' .. ${instanceId}, 'PX', ${leaseMs})
end
`;

/**
 * Lua: sets `holder` to `"<since> <instance id>"` from the record under `holderKey` when it belongs
 * to the grant of `token` (a Lua expression, false when the lock is free), else to false.
 */
export const readHolderLua = (holderKey: string, token: string): string => `
local holder = false
do
  local record = redis.pcall('GET', ${holderKey})
  if type(record) == 'string' and ${token} then
    local since, owner, id = string.match(record, '^(%d+) (%S+) (.*)$')
    if owner == ${token} then holder = since .. ' ' .. id end
  end
end
`;
