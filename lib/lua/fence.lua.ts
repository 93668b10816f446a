/**
 * Lua, shared by the scripts that grant a lock: sets `fence` to the next fence of the counter at
 * `counterKey`, and makes the counter live `lifetime` ms (a Lua expression: the new lease plus
 * the retention), so it outlives its lock and nothing the library writes stays forever. While
 * the counter exists, fences just count up. A new counter — first use, expired after the
 * retention, or lost to a restart — starts from Redis' clock in microseconds (`TIME`, or the
 * reply `clock` names when the script read it already for this grant), above every fence handed
 * out before unless that clock stepped back by more than the time since (at least the
 * retention), and is written with its lifetime in the same SET. Redis' one clock, never a
 * client's: clients' clocks differ, and one that lags would start the counter below fences
 * already handed out.
 */
export const nextFenceLua = (counterKey: string, lifetime: string, clock?: string): string => `
local fence = redis.call('INCR', ${counterKey})
if fence == 1 then
  local now = ${clock ?? "redis.call('TIME')"}
  fence = tonumber(string.format('%d', now[1] * 1000000 + now[2]))
  redis.call('SET', ${counterKey}, string.format('%d', fence), 'PX', string.format('%d', ${lifetime}))
else
  redis.call('PEXPIRE', ${counterKey}, string.format('%d', ${lifetime}))
end
`;
