/**
 * Lua, shared by the scripts that grant a lock: records who holds it — `"<since> <instance id>"`,
 * since in ms on Redis' clock — under `holderKey`, expiring with the lease (`leaseMs`, a Lua
 * expression). It is read by inspection only: ownership is still the token in the lock key alone,
 * so a record that is missing (a grant by an older version) or stale changes no compare.
 */
export const writeHolderLua = (holderKey: string, instanceId: string, leaseMs: string): string => `
do
  local clock = redis.call('TIME')
  local since = string.format('%d', clock[1] * 1000 + math.floor(clock[2] / 1000))
  redis.call('SET', ${holderKey}, since .. ' ' .. ${instanceId}, 'PX', ${leaseMs})
end
`;
