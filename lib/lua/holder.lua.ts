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
 * Lua: sets `holder` to `"<since> <instance id>"` for the grant of `token` (a Lua expression, false
 * when the lock is free): read from the token itself when it carries them (a plain grant, see
 * `newHolderToken`), else from the record under `holderKey` when that belongs to this grant (fair
 * mode's hand-offs write one), else false.
 */
export const readHolderLua = (holderKey: string, token: string): string => `
local holder = false
if ${token} then
  local since, id = string.match(${token}, '^%x+ (%d+) (.*)$')
  if since then
    holder = since .. ' ' .. id
  else
    local record = redis.pcall('GET', ${holderKey})
    if type(record) == 'string' then
      local recorded, owner, recordedId = string.match(record, '^(%d+) (%S+) (.*)$')
      if owner == ${token} then holder = recorded .. ' ' .. recordedId end
    end
  end
end
`;
