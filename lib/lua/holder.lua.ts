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
 * when the lock is free): from the record under `holderKey` when that belongs to this grant (fair
 * mode's grants after queueing and its hand-offs write one: the token's own `since` is when the
 * call began, not when it got the lock), else from the token itself when it carries them (every
 * other grant, see `newHolderToken`), else false.
 */
export const readHolderLua = (holderKey: string, token: string): string => `
local holder = false
if ${token} then
  local record = redis.pcall('GET', ${holderKey})
  -- "<since> <token> <instance id>", the token compared whole (it holds spaces of its own).
  local recorded = type(record) == 'string' and string.match(record, '^(%d+) ')
  if recorded then
    local rest, owner = string.sub(record, #recorded + 2), ${token}
    if string.sub(rest, 1, #owner + 1) == owner .. ' ' then
      holder = recorded .. ' ' .. string.sub(rest, #owner + 2)
    end
  end
  if not holder then
    local since, id = string.match(${token}, '^%x+ (%d+) (.*)$')
    if since then holder = since .. ' ' .. id end
  end
end
`;
