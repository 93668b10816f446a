/**
 * Lua, shared by the scripts that grant a lock: sets `fence` to the next fence of the counter at
 * `counterKey`, and makes the counter live `lifetime` ms (a Lua expression: the new lease plus
 * the retention), so it outlives its lock and nothing the library writes stays forever. While
 * the counter exists, fences just count up. A new counter — first use, expired after the
 * retention, or lost to a restart — starts from Redis' clock in microseconds, above every fence
 * handed out before unless that clock moved back further than the time since (or a key saw more
 * than one grant per µs).
 */
export const nextFenceLua = (counterKey: string, lifetime: string): string => `
local fence = redis.call('INCR', ${counterKey})
if fence == 1 then
  local now = redis.call('TIME')
  fence = tonumber(string.format('%d', now[1] * 1000000 + now[2]))
  redis.call('SET', ${counterKey}, string.format('%d', fence))
end
redis.call('PEXPIRE', ${counterKey}, string.format('%d', ${lifetime}))
`;
