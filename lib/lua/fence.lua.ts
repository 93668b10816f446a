/**
 * Lua, shared by the scripts that grant a lock: sets `fence` to the next fence of the counter at
 * `counterKey`, and makes the counter live `lifetime` ms (a Lua expression: the new lease plus
 * the retention), so it outlives its lock and nothing the library writes stays forever. While
 * the counter exists, fences just count up. A new counter — first use, expired after the
 * retention, or lost to a restart — starts from Redis' clock in microseconds, above every fence
 * handed out before unless that clock moved back further than the time since (or a key saw more
 * than one grant per µs), and is written with its lifetime in the same SET. `clock` names a `TIME`
 * reply the script read already for this grant, to read the clock once.
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
